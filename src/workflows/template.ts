import { WORKFLOW_ERRORS, WorkflowDefinitionError } from './errors.js';

/** What references read: the run's input and the results of the steps so far. */
export interface Scope {
  input: unknown;
  steps: Readonly<Record<string, unknown>>;
}

export type Template = (scope: Scope) => unknown;

const SEGMENT = '[A-Za-z0-9_-]{1,64}';
const REFERENCE = new RegExp(`\\$\\{((?:input|steps)(?:\\.${SEGMENT}){0,16})\\}`, 'g');
const EXACT = new RegExp(`^\\$\\{((?:input|steps)(?:\\.${SEGMENT}){0,16})\\}$`);
/** Templates are data from tenants; this bounds the work of compiling and of every evaluation. */
const MAX_TEMPLATE_DEPTH = 32;

const isRecord = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value);

/** Own properties and array indexes only: `${input.constructor}` must not reach a prototype. */
function lookup(path: readonly string[], scope: Scope, reference: string): unknown {
  let node: unknown = path[0] === 'input' ? scope.input : scope.steps;
  for (const segment of path.slice(1)) {
    if (Array.isArray(node) && /^\d+$/.test(segment) && Number(segment) < node.length) node = node[Number(segment)];
    else if (isRecord(node) && Object.hasOwn(node, segment)) node = node[segment];
    // A missing input field is the caller's; a missing field of a step's result is the definition's expectation.
    else throw path[0] === 'input' ? WORKFLOW_ERRORS.missingReference(reference) : WORKFLOW_ERRORS.missingStepValue(reference);
  }
  return node;
}

function asText(value: unknown): string {
  if (typeof value === 'string') return value;
  if (value === undefined) return '';
  return typeof value === 'object' ? JSON.stringify(value) : String(value);
}

/** Names of the steps a template reads (`${steps.create.id}` → `create`), for checking them before any run. */
export function stepReferences(template: unknown, found = new Set<string>(), depth = 0): Set<string> {
  if (depth > MAX_TEMPLATE_DEPTH) return found;
  if (typeof template === 'string') {
    for (const match of template.matchAll(REFERENCE)) {
      const [root, step] = match[1]!.split('.');
      if (root === 'steps' && step) found.add(step);
    }
  } else if (Array.isArray(template)) {
    for (const item of template) stepReferences(item, found, depth + 1);
  } else if (isRecord(template)) {
    for (const value of Object.values(template)) stepReferences(value, found, depth + 1);
  }
  return found;
}

function compileString(text: string, where: string): Template {
  const exact = EXACT.exec(text);
  if (exact) {
    const path = exact[1]!.split('.');
    return (scope) => lookup(path, scope, exact[1]!);
  }
  const parts: Array<string | readonly string[]> = [];
  let last = 0;
  for (const match of text.matchAll(REFERENCE)) {
    parts.push(text.slice(last, match.index), match[1]!.split('.'));
    last = match.index + match[0].length;
  }
  parts.push(text.slice(last));
  const literal = parts.filter((part) => typeof part === 'string').join('');
  if (literal.includes('${')) throw new WorkflowDefinitionError(`${where}: "\${" must start a reference such as \${input.id} or \${steps.create.id}`);
  if (parts.length === 1) return () => text;
  return (scope) => parts.map((part) => (typeof part === 'string' ? part : asText(lookup(part, scope, part.join('.'))))).join('');
}

/**
 * SPEC 11.3: a string that is exactly `${input.a}` or `${steps.s.a}` takes that value with its type; references
 * inside other text are interpolated (objects as JSON). Arrays and objects are templates element by element.
 * Compiled once per definition, so a run only walks closures.
 */
export function compileTemplate(template: unknown, where: string, depth = 0): Template {
  if (depth > MAX_TEMPLATE_DEPTH) throw new WorkflowDefinitionError(`${where}: nested deeper than ${MAX_TEMPLATE_DEPTH} levels`);
  if (typeof template === 'string') return compileString(template, where);
  if (Array.isArray(template)) {
    const items = template.map((item, index) => compileTemplate(item, `${where}.${index}`, depth + 1));
    return (scope) => items.map((item) => item(scope));
  }
  if (isRecord(template)) {
    const fields = Object.entries(template).map(([key, value]) => [key, compileTemplate(value, `${where}.${key}`, depth + 1)] as const);
    // fromEntries defines properties, so a "__proto__" key stays a plain field.
    return (scope) => Object.fromEntries(fields.map(([key, field]) => [key, field(scope)]));
  }
  return () => template;
}
