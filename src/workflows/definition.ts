import { Type, type Static, type TSchema } from '@sinclair/typebox';
import { TypeCompiler, type TypeCheck } from '@sinclair/typebox/compiler';
import { HTTP_METHODS, ResourceName, type HttpMethod } from '../api/provider.js';
import { schemaViolation } from '../api/schema-violation.js';
import { internalViolation } from '../auth/authority.js';
import { WorkflowDefinitionError } from './errors.js';
import { compileTemplate, stepReferences, type Template } from './template.js';

export const MAX_STEPS_PER_WORKFLOW = 64;
export const DEFAULT_WORKFLOW_TIMEOUT_MS = 30_000;
export const MAX_WORKFLOW_TIMEOUT_MS = 120_000;
/**
 * Body fields of `POST /workflows/<name>` besides the inputs; a workflow named like one could not be called.
 * `name` is set by the route so restrictions such as `{ "workflow": { "name": ["deploy"] } }` apply.
 */
export const RESERVED_WORKFLOW_NAMES: ReadonlySet<string> = new Set(['method', 'apikey', 'name', 'organization_id', 'host', 'user', 'socket']);
/**
 * IPC steps run with the organization's authority on a shared server: process controls and the server-wide
 * storage are for operators (`POST /control`), not for tenant workflows.
 */
const OPERATOR_METHODS = /^(status|cordon|drain|shed|restart|reboot|shutdown|storage(\..*)?|state(\..*)?)$/;

const Targets = {
  server: Type.Optional(Type.Union([Type.String({ maxLength: 128 }), Type.Array(Type.String({ maxLength: 128 }), { minItems: 1, maxItems: 256 })])),
  worker: Type.Optional(Type.Union([Type.Integer({ minimum: 0, maximum: 256 }), Type.Array(Type.Integer({ minimum: 0, maximum: 256 }), { minItems: 1, maxItems: 256 })])),
  master: Type.Optional(Type.Boolean()),
  broadcast: Type.Optional(Type.Boolean()),
};

const ApiStep = Type.Object(
  {
    name: ResourceName,
    api: ResourceName,
    endpoint: ResourceName,
    method: Type.Union(HTTP_METHODS.map((method) => Type.Literal(method))),
    data: Type.Optional(Type.Unknown({ description: 'Template: path parameters and body (or query)' })),
  },
  { additionalProperties: false, description: 'An API call (SPEC 10); its result is the data of the reply' },
);
const WorkflowStep = Type.Object(
  { name: ResourceName, workflow: ResourceName, input: Type.Optional(Type.Unknown({ description: "Template; default: this run's input" })) },
  { additionalProperties: false, description: 'Another workflow; its result is that workflow’s result' },
);
const IpcStep = Type.Object(
  {
    name: ResourceName,
    ipc: Type.Object(
      {
        method: Type.String({ minLength: 1, maxLength: 128, pattern: '^[A-Za-z][A-Za-z0-9_.:-]*$' }),
        data: Type.Optional(Type.Unknown()),
        ...Targets,
        timeoutMs: Type.Optional(Type.Integer({ minimum: 1, maximum: MAX_WORKFLOW_TIMEOUT_MS })),
      },
      { additionalProperties: false },
    ),
  },
  { additionalProperties: false, description: 'An IPC envelope (SPEC 5) scoped to the organization; its result is the request result' },
);

/** SPEC 11.2: a workflow as written in `workflows` and resource files. */
export const WorkflowDefinition = Type.Object(
  {
    name: ResourceName,
    description: Type.Optional(Type.String({ maxLength: 1024 })),
    steps: Type.Array(Type.Object({ name: ResourceName }, { additionalProperties: true }), { maxItems: MAX_STEPS_PER_WORKFLOW }),
    output: Type.Optional(Type.Unknown({ description: "Template of the result; default: the last step's result" })),
    timeoutMs: Type.Optional(Type.Integer({ minimum: 1, maximum: MAX_WORKFLOW_TIMEOUT_MS, description: `Whole run (default ${DEFAULT_WORKFLOW_TIMEOUT_MS})` })),
  },
  { additionalProperties: false },
);
export type WorkflowDefinition = Static<typeof WorkflowDefinition>;

export type CompiledStep =
  | { kind: 'api'; name: string; api: string; endpoint: string; method: HttpMethod; data?: Template }
  | { kind: 'workflow'; name: string; workflow: string; input?: Template }
  | { kind: 'ipc'; name: string; envelope: Template };

export interface CompiledWorkflow {
  name: string;
  steps: CompiledStep[];
  output?: Template;
  timeoutMs: number;
  /** Registered in code by the embedding application, not stored by a tenant: its IPC steps may name server targets. */
  trusted?: boolean;
}

const definitionCheck = TypeCompiler.Compile(WorkflowDefinition);
const STEP_KINDS: ReadonlyArray<readonly [kind: CompiledStep['kind'], field: string, check: TypeCheck<TSchema>]> = [
  ['api', 'api', TypeCompiler.Compile(ApiStep)],
  ['workflow', 'workflow', TypeCompiler.Compile(WorkflowStep)],
  ['ipc', 'ipc', TypeCompiler.Compile(IpcStep)],
];

function compileStep(step: Record<string, unknown>, where: string, earlier: ReadonlySet<string>): CompiledStep {
  const kinds = STEP_KINDS.filter(([, field]) => Object.hasOwn(step, field));
  if (kinds.length !== 1) throw new WorkflowDefinitionError(`${where}: a step needs exactly one of "api", "workflow" or "ipc"`);
  const [kind, , check] = kinds[0]!;
  const violation = schemaViolation(check, step, where);
  if (violation) throw new WorkflowDefinitionError(violation);
  const template = kind === 'api' ? step.data : kind === 'workflow' ? step.input : step.ipc;
  for (const name of stepReferences(template)) {
    if (!earlier.has(name)) throw new WorkflowDefinitionError(`${where}: \${steps.${name}} is not an earlier step`);
  }
  const compiled = template === undefined ? undefined : compileTemplate(template, `${where}.${kind === 'api' ? 'data' : kind === 'workflow' ? 'input' : 'ipc'}`);
  const name = step.name as string;
  if (kind === 'api') return { kind, name, api: step.api as string, endpoint: step.endpoint as string, method: step.method as HttpMethod, data: compiled };
  if (kind === 'workflow') return { kind, name, workflow: step.workflow as string, input: compiled };
  const method = (step.ipc as { method: string }).method;
  if (OPERATOR_METHODS.test(method)) throw new WorkflowDefinitionError(`${where}.ipc.method: "${method}" is an operator control; use POST /control`);
  const internal = internalViolation(method);
  if (internal) throw new WorkflowDefinitionError(`${where}.ipc.method: ${internal}`);
  return { kind, name, envelope: compiled! };
}

/** Validates and compiles a definition; the error names the first invalid field (`steps.0.api: ...`). */
export function compileWorkflow(value: unknown, prefix = ''): CompiledWorkflow {
  const violation = schemaViolation(definitionCheck, value, prefix);
  if (violation) throw new WorkflowDefinitionError(violation);
  const definition = value as WorkflowDefinition;
  const where = (field: string) => [prefix, field].filter(Boolean).join('.');
  if (RESERVED_WORKFLOW_NAMES.has(definition.name)) throw new WorkflowDefinitionError(`${where('name')}: "${definition.name}" is reserved`);
  const earlier = new Set<string>();
  const steps = definition.steps.map((step, index) => {
    if (earlier.has(step.name)) throw new WorkflowDefinitionError(`${where(`steps.${index}.name`)}: "${step.name}" is used by an earlier step`);
    const compiled = compileStep(step, where(`steps.${index}`), earlier);
    earlier.add(step.name);
    return compiled;
  });
  let output: Template | undefined;
  if (definition.output !== undefined) {
    for (const name of stepReferences(definition.output)) {
      if (!earlier.has(name)) throw new WorkflowDefinitionError(`${where('output')}: \${steps.${name}} is not a step of this workflow`);
    }
    output = compileTemplate(definition.output, where('output'));
  }
  return { name: definition.name, steps, output, timeoutMs: definition.timeoutMs ?? DEFAULT_WORKFLOW_TIMEOUT_MS };
}

/** Why a definition is refused, as `field: problem`; undefined when it is valid. */
export function workflowViolation(value: unknown, prefix = ''): string | undefined {
  try {
    compileWorkflow(value, prefix);
    return undefined;
  } catch (error) {
    if (error instanceof WorkflowDefinitionError) return error.message;
    throw error;
  }
}
