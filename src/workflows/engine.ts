import type { ApiCallOptions, ApiReply } from '../api/service.js';
import { ApiError } from '../api/errors.js';
import { IpcError } from '../ipc/envelope.js';
import type { RequestResult } from '../ipc/handlers.js';
import type { CompiledStep, CompiledWorkflow } from './definition.js';
import { WORKFLOW_ERRORS, WorkflowError } from './errors.js';
import type { Scope } from './template.js';
import { tenantViolation } from '../auth/authority.js';

/** Nesting of workflow steps, the top-level run included: enough for composition, a wall for recursion. */
export const MAX_WORKFLOW_DEPTH = 8;
/** Steps of one run, nested ones included: a fan-out of nested workflows cannot multiply without bound. */
export const MAX_STEPS_PER_RUN = 256;
const DEFAULT_IPC_TIMEOUT_MS = 5_000;

export interface EngineDeps {
  api: { send(envelope: unknown, options?: ApiCallOptions): Promise<ApiReply> };
  request?(envelope: unknown, options: { timeoutMs?: number }): Promise<RequestResult>;
  resolve(organizationId: string, name: string): Promise<CompiledWorkflow | null>;
  /** Whether an organization is the platform organization (SPEC 8.4); without it, none is. */
  isPlatform?(organizationId: string): Promise<boolean>;
}

interface RunContext {
  organizationId: string;
  depth: number;
  budget: { steps: number };
  /** Set when the run's deadline passed: later steps do not start (the run has already failed). */
  expired: { value: boolean };
  deadline: number;
  /** Names of the steps running now, outermost first: what a timeout reports. */
  active: string[];
  /** The running workflow was registered in code (see `CompiledWorkflow.trusted`). */
  trusted: boolean;
  /** The run's timeout, naming the steps running now. */
  timedOut: () => WorkflowError;
}

const remaining = (context: RunContext) => Math.max(1, context.deadline - Date.now());

/** What a step's API or IPC failure is for the run: a service missing here, a timeout, a failure, or a refusal. */
function stepError(error: ApiError | IpcError): WorkflowError {
  if (error.statusCode === 503) return WORKFLOW_ERRORS.unavailable(error.message);
  // A provider's own failures are the step's; anything refused (an unknown api or endpoint, an envelope the IPC
  // layer does not take) is the definition's fault.
  if (error instanceof IpcError) return WORKFLOW_ERRORS.stepRefused(error.message);
  if (error.statusCode === 504) return WORKFLOW_ERRORS.stepTimeout(error.message);
  return error.statusCode >= 500 ? WORKFLOW_ERRORS.stepFailed(error.message) : WORKFLOW_ERRORS.stepRefused(error.message);
}

/** Prefixes the step's name; nested failures read `step "outer" → step "inner": ...`. */
function atStep(error: unknown, step: CompiledStep): unknown {
  if (error instanceof WorkflowError) return error.atStep(step.name);
  if (error instanceof ApiError || error instanceof IpcError) return stepError(error).atStep(step.name);
  return error;
}

async function runStep(deps: EngineDeps, step: CompiledStep, scope: Scope, context: RunContext): Promise<unknown> {
  if (step.kind === 'api') {
    const envelope = { organization_id: context.organizationId, api: step.api, endpoint: step.endpoint, method: step.method, data: step.data?.(scope) };
    // The call's own timeout ends at the run's deadline at the latest, so nothing outlives the run for long.
    const budget = remaining(context);
    let reply;
    try {
      reply = await deps.api.send(envelope, { timeoutMs: budget });
    } catch (error) {
      // Given what was left of the run, the call's timeout is the run's: its timer may simply fire first.
      if (error instanceof ApiError && error.code === 'upstream_timeout' && error.timeoutMs === budget) throw context.timedOut();
      throw error;
    }
    if (reply.status >= 400) throw WORKFLOW_ERRORS.stepFailed(`provider "${step.api}" answered ${reply.status}`);
    return reply.data;
  }
  if (step.kind === 'workflow') {
    const next = await deps.resolve(context.organizationId, step.workflow);
    // Naming a workflow that does not exist is the definition's fault, as naming an unknown api is: not the caller's 404.
    if (!next) throw WORKFLOW_ERRORS.stepRefused(`no workflow "${step.workflow}"`);
    return execute(deps, next, step.input ? step.input(scope) : scope.input, { ...context, depth: context.depth + 1, trusted: next.trusted === true });
  }
  if (!deps.request) throw WORKFLOW_ERRORS.unavailable('IPC is not available in this process');
  const envelope: Record<string, unknown> = { ...(step.envelope(scope) as Record<string, unknown>), organization_id: context.organizationId };
  // A tenant's stored workflow reaches its own organization's workers only, and no method acting on the server
  // itself (its overview, metrics, certificates), as its keys do (SPEC 8.4).
  const violation = context.trusted ? undefined : tenantViolation({ ...envelope, method: String(envelope.method) });
  if (violation && !(await deps.isPlatform?.(context.organizationId))) throw WORKFLOW_ERRORS.platformOnly(violation);
  const timeoutMs = Math.min((envelope.timeoutMs as number | undefined) ?? DEFAULT_IPC_TIMEOUT_MS, remaining(context));
  const result = await deps.request({ ...envelope, timeoutMs }, { timeoutMs });
  const failed = result.replies.find((reply) => !reply.ok);
  if (failed) throw WORKFLOW_ERRORS.stepFailed(`worker ${failed.worker} of ${failed.server} answered ${failed.error?.code}: ${failed.error?.message}`);
  if (result.replies.length === 0) throw WORKFLOW_ERRORS.stepFailed('no target answered');
  return result;
}

async function execute(deps: EngineDeps, workflow: CompiledWorkflow, input: unknown, context: RunContext): Promise<unknown> {
  if (context.depth > MAX_WORKFLOW_DEPTH) throw WORKFLOW_ERRORS.depthExceeded(MAX_WORKFLOW_DEPTH);
  const steps: Record<string, unknown> = {};
  const scope: Scope = { input, steps };
  let last: unknown = null;
  for (const step of workflow.steps) {
    // The run has already failed with its timeout: this only keeps later steps from starting.
    if (context.expired.value) throw context.timedOut();
    if (--context.budget.steps < 0) throw WORKFLOW_ERRORS.stepLimit(MAX_STEPS_PER_RUN).atStep(step.name);
    context.active.push(step.name);
    try {
      last = await runStep(deps, step, scope, context);
    } catch (error) {
      // The run's timeout names its steps itself.
      if (error instanceof WorkflowError && error.code === 'workflow_timeout') throw error;
      throw atStep(error, step);
    } finally {
      context.active.pop();
    }
    steps[step.name] = last;
  }
  return outputOf(workflow, scope, last);
}

/** The run's answer: its output template over the scope, or the last step's result without one. */
function outputOf(workflow: CompiledWorkflow, scope: Scope, last: unknown): unknown {
  if (!workflow.output) return last;
  try {
    return workflow.output(scope);
  } catch (error) {
    if (error instanceof WorkflowError) throw error.within('output: ', undefined);
    throw error;
  }
}

/**
 * One run of a workflow for one input (SPEC 11.2). The whole run, nested workflows included, shares one
 * deadline and one step budget; when the deadline passes the run fails even if a step ignores it, and every
 * API or IPC call it makes times out by then at the latest. A workflow without steps is only its output
 * template, where nothing can wait: it is answered at once, without a promise (and throws its failure).
 */
export function runWorkflow(deps: EngineDeps, workflow: CompiledWorkflow, input: unknown, organizationId: string): unknown {
  if (workflow.steps.length === 0) return outputOf(workflow, { input, steps: {} }, null);
  return runWithDeadline(deps, workflow, input, organizationId);
}

async function runWithDeadline(deps: EngineDeps, workflow: CompiledWorkflow, input: unknown, organizationId: string): Promise<unknown> {
  const active: string[] = [];
  const expired = { value: false };
  const timedOut = () => {
    const at = active.map((name) => `step "${name}"`).join(' → ');
    const timeout = WORKFLOW_ERRORS.workflowTimeout(workflow.name, workflow.timeoutMs);
    return at ? timeout.within(`${at}: `, active[0]) : timeout;
  };
  const context: RunContext = { organizationId, depth: 1, budget: { steps: MAX_STEPS_PER_RUN }, expired, deadline: Date.now() + workflow.timeoutMs, active, trusted: workflow.trusted === true, timedOut };
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => {
      expired.value = true;
      reject(timedOut());
    }, workflow.timeoutMs);
    timer.unref();
  });
  try {
    return await Promise.race([execute(deps, workflow, input, context), deadline]);
  } finally {
    clearTimeout(timer);
  }
}
