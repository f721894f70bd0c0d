import { InvalidInputError } from './errors.js';
import { isPlainObject } from './validate.js';
import type { Filter, IndexOptions, IndexSpec } from './types.js';

/** MongoDB's key for an empty array; documents cannot hold `$` field names, so no stored value encodes the same. */
const EMPTY_ARRAY_KEY = { $emptyArray: true };

/** The MongoDB-style default name: `{ organization_id: 1, name: 1 }` → `organization_id_1_name_1`. */
export function defaultIndexName(fields: readonly string[]): string {
  return fields.map((field) => `${field}_1`).join('_');
}

export function indexSpec(fields: Record<string, 1>, options: IndexOptions): IndexSpec {
  if (!isPlainObject(fields) || Object.keys(fields).length === 0) throw new InvalidInputError('an index needs at least one field');
  if (options?.unique !== true) throw new InvalidInputError('only unique indexes are supported');
  for (const [field, direction] of Object.entries(fields)) {
    if (direction !== 1) throw new InvalidInputError(`index field "${field}" must be 1`);
    if (field === '' || field.split('.').some((part) => part === '' || part.startsWith('$') || part === '__proto__')) {
      throw new InvalidInputError(`invalid index field "${field}"`);
    }
  }
  const names = Object.keys(fields);
  const name = options.name ?? defaultIndexName(names);
  if (!/^[A-Za-z0-9_.-]{1,128}$/.test(name)) throw new InvalidInputError(`invalid index name "${name}"`);
  return { name, fields: names, sparse: options.sparse === true };
}

/** Values at a dotted path, descending into arrays of sub-documents as MongoDB does. */
function valuesAt(value: unknown, segments: readonly string[], depth: number, out: unknown[]): void {
  if (depth === segments.length) {
    out.push(value);
    return;
  }
  if (Array.isArray(value)) {
    for (const item of value) valuesAt(item, segments, depth, out);
    return;
  }
  if (!isPlainObject(value) || !Object.hasOwn(value, segments[depth]!)) return;
  valuesAt(value[segments[depth]!], segments, depth + 1, out);
}

/**
 * The keys a document contributes to a unique index, each the JSON of one combination of field values.
 * An array field contributes one key per element (a multikey index: `organizations.hosts` makes every host
 * name unique across organizations), a missing field indexes as null, and `null` means a sparse index skips it.
 */
export function indexKeys(spec: IndexSpec, document: Record<string, unknown>): string[] | null {
  let missing = 0;
  let arrays = 0;
  const perField = spec.fields.map((field) => {
    const found: unknown[] = [];
    valuesAt(document, field.split('.'), 0, found);
    if (found.length === 0) {
      missing += 1;
      return [null];
    }
    const expanded = found.flatMap((value) => (Array.isArray(value) ? (value.length ? value : [EMPTY_ARRAY_KEY]) : [value]));
    if (found.some(Array.isArray) || found.length > 1) arrays += 1;
    return expanded;
  });
  if (spec.sparse && missing === spec.fields.length) return null;
  if (arrays > 1) throw new InvalidInputError(`cannot index parallel arrays in index ${spec.name}`);
  let combinations: unknown[][] = [[]];
  for (const values of perField) combinations = combinations.flatMap((prefix) => values.map((value) => [...prefix, value]));
  return [...new Set(combinations.map((values) => JSON.stringify(values)))];
}

/** `{ field: value }` for a key, the way MongoDB reports a duplicate. */
export function describeKey(spec: IndexSpec, key: string): Record<string, unknown> {
  const values = JSON.parse(key) as unknown[];
  return Object.fromEntries(spec.fields.map((field, i) => [field, values[i]]));
}

const isScalar = (value: unknown): value is string | number | boolean =>
  typeof value === 'string' || typeof value === 'boolean' || (typeof value === 'number' && Number.isFinite(value));

/** The scalar a top-level condition requires by equality (`field: v` or `field: { $eq: v }`), if any. */
function equalityValue(condition: unknown): { value: string | number | boolean } | undefined {
  if (isScalar(condition)) return { value: condition };
  if (isPlainObject(condition)) {
    const keys = Object.keys(condition);
    if (keys.length === 1 && keys[0] === '$eq' && isScalar(condition.$eq)) return { value: condition.$eq };
  }
  return undefined;
}

export type LookupPlan =
  | { kind: 'ids'; ids: string[]; exact: boolean }
  | { kind: 'index'; index: string; key: string; exact: boolean };

/**
 * Which rows can match, when the filter pins `_id` or every field of a unique index by equality. `exact` means
 * every row found matches the whole filter, so the caller may skip evaluating it.
 */
export function planLookup(filter: Filter, specs: readonly IndexSpec[]): LookupPlan | undefined {
  const fieldCount = Object.keys(filter).length;
  const id = filter._id;
  if (id !== undefined) {
    const equal = equalityValue(id);
    if (equal) return { kind: 'ids', ids: typeof equal.value === 'string' ? [equal.value] : [], exact: fieldCount === 1 };
    if (isPlainObject(id) && Object.keys(id).length === 1 && Array.isArray(id.$in) && id.$in.every(isScalar)) {
      return { kind: 'ids', ids: [...new Set(id.$in.filter((value): value is string => typeof value === 'string'))], exact: fieldCount === 1 };
    }
  }
  for (const spec of specs) {
    const values: unknown[] = [];
    for (const field of spec.fields) {
      const equal = equalityValue(filter[field]);
      if (!equal) break;
      values.push(equal.value);
    }
    if (values.length === spec.fields.length) {
      return { kind: 'index', index: spec.name, key: JSON.stringify(values), exact: fieldCount === spec.fields.length };
    }
  }
  return undefined;
}
