import type { Permissions } from '../schema/permissions.js';

/** What the evaluator reads from an envelope; anything else in it is ignored. */
export type EnvelopeFields = Readonly<Record<string, unknown>> & { readonly method: string };

export interface Subject {
  /** Admin keys may do everything. */
  admin?: boolean;
  /** The key's own permissions (none for a request without a key). */
  permissions?: Permissions;
  /** The organization's default permissions, granted to every request on its hosts, with or without a key. */
  defaults?: Permissions;
}

type Scalar = string | number | boolean | null;

const isScalar = (value: unknown): value is Scalar =>
  value === null || typeof value === 'string' || typeof value === 'boolean' || (typeof value === 'number' && Number.isFinite(value));

const isRecord = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value);

/**
 * The entry that decides `method`: the exact method, else the longest dotted prefix (`workflow.deploy` then
 * `workflow` for `workflow.deploy.now`), else `*`. Own properties only: a method named `constructor` must not
 * find `Object.prototype.constructor`.
 */
export function ruleFor(permissions: unknown, method: string): { entry: string; value: unknown } | undefined {
  if (!isRecord(permissions)) return undefined;
  for (let candidate = method; ; ) {
    if (Object.hasOwn(permissions, candidate)) return { entry: candidate, value: permissions[candidate] };
    const dot = candidate.lastIndexOf('.');
    if (dot <= 0) break;
    candidate = candidate.slice(0, dot);
  }
  return Object.hasOwn(permissions, '*') ? { entry: '*', value: permissions['*'] } : undefined;
}

/** A value is allowed when it (or, for an array of targets, every one of its elements) is in the list. */
function allowedValue(value: unknown, allowed: unknown): boolean {
  const list: unknown[] = Array.isArray(allowed) ? allowed : [allowed];
  if (!list.every(isScalar)) return false;
  if (Array.isArray(value)) return value.length > 0 && value.every((item) => isScalar(item) && list.includes(item));
  return isScalar(value) && list.includes(value);
}

function valueAt(data: unknown, path: string): unknown {
  let node = data;
  for (const segment of path.split('.')) {
    if (!isRecord(node) || !Object.hasOwn(node, segment)) return undefined;
    node = node[segment];
  }
  return node;
}

/** Every listed envelope field, and every listed `data` field, holds allowed values; a missing one does not. */
export function restrictionAllows(restriction: Record<string, unknown>, envelope: EnvelopeFields): boolean {
  for (const [field, allowed] of Object.entries(restriction)) {
    if (field === 'data') {
      if (!isRecord(allowed)) return false;
      for (const [path, values] of Object.entries(allowed)) if (!allowedValue(valueAt(envelope.data, path), values)) return false;
    } else if (!allowedValue(Object.hasOwn(envelope, field) ? envelope[field] : undefined, allowed)) {
      return false;
    }
  }
  return true;
}

/** Whether one permission set grants the envelope: `true`, or a restriction the envelope satisfies. */
export function grants(permissions: unknown, envelope: EnvelopeFields): boolean {
  const rule = ruleFor(permissions, envelope.method);
  if (!rule) return false;
  if (rule.value === true) return true;
  return isRecord(rule.value) && restrictionAllows(rule.value, envelope);
}

/**
 * SPEC 8.2. A request is allowed when its key is admin, or its key's permissions grant it, or the
 * organization's defaults do: a key never allows less than no key at all, since a caller could simply drop it.
 */
export function isPermitted(subject: Subject, envelope: EnvelopeFields): boolean {
  if (typeof envelope?.method !== 'string') return false;
  return subject.admin === true || grants(subject.permissions, envelope) || grants(subject.defaults, envelope);
}
