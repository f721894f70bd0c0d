import { isPlainObject } from '../validate.js';
import type { Filter } from '../types.js';

type Scalar = string | number | boolean;

/** More values than this in one `$in` are left to the evaluation in JavaScript rather than made one OR each. */
const MAX_PUSHED_VALUES = 32;

const isScalar = (value: unknown): value is Scalar =>
  typeof value === 'string' || typeof value === 'boolean' || (typeof value === 'number' && Number.isFinite(value));

/** PostgreSQL text cannot hold NUL, and documents holding one are refused (see collection.ts): such a value matches nothing. */
export const holdsNul = (value: unknown): boolean => typeof value === 'string' && value.includes('\0');

/**
 * The values a field condition requires by equality: `v`, `{ $eq: v }` or `{ $in: [...] }` of scalars (the
 * condition's other operators only narrow it further). Null is never pushed: it also matches a missing field.
 */
function equalityValues(condition: unknown): Scalar[] | undefined {
  if (isScalar(condition)) return [condition];
  if (!isPlainObject(condition) || !Object.keys(condition).every((key) => key.startsWith('$'))) return undefined;
  if (isScalar(condition.$eq)) return [condition.$eq];
  const list = condition.$in;
  if (Array.isArray(list) && list.length <= MAX_PUSHED_VALUES && list.every(isScalar)) return list;
  return undefined;
}

/**
 * SQL conditions, ANDed, that every document matching `filter` satisfies (a superset: the caller still evaluates
 * the whole filter on what they select, with the same code as the embedded store). Parameters are appended to
 * `values`; the table is aliased `d`.
 *
 * - `_id` by equality or `$in`: the primary key.
 * - A top-level field by equality to a string, number or boolean (`organization_id` above all, which every
 *   organization scope adds): the field equals it or is an array holding it, which in jsonb is
 *   `doc @> {"f": v} OR doc @> {"f": [v]}` — both answered by the GIN index. Containment compares numbers by
 *   value and strings byte for byte, as the query language does.
 * - `$and` clauses each; `$or` when every branch yields a condition.
 *
 * Everything else (dotted paths, which also reach into arrays of sub-documents; comparisons, which follow the
 * query language's type order; null; `$ne`, `$nin`, `$exists`) is left to the evaluation in JavaScript.
 */
export function pushdown(filter: Filter, values: unknown[]): string[] {
  const conditions: string[] = [];
  const parameter = (value: unknown) => `$${values.push(value)}`;
  for (const [field, condition] of Object.entries(filter)) {
    if (field === '$and' && Array.isArray(condition)) {
      for (const clause of condition) if (isPlainObject(clause)) conditions.push(...pushdown(clause, values));
      continue;
    }
    if (field === '$or' && Array.isArray(condition)) {
      // The branches' parameters are kept only when every branch yields a condition.
      const scratch = [...values];
      const branches = condition.map((clause) => (isPlainObject(clause) ? pushdown(clause, scratch) : []));
      if (branches.length > 0 && branches.every((branch) => branch.length > 0)) {
        values.push(...scratch.slice(values.length));
        conditions.push(`(${branches.map((branch) => `(${branch.join(' AND ')})`).join(' OR ')})`);
      }
      continue;
    }
    if (field.startsWith('$') || field.includes('.')) continue;
    const equal = equalityValues(condition);
    if (!equal) continue;
    const possible = equal.filter((value) => !holdsNul(value));
    if (field === '_id') {
      const ids = possible.filter((value): value is string => typeof value === 'string');
      conditions.push(ids.length === 0 ? 'false' : `d.id = ANY(${parameter(ids)}::text[])`);
      continue;
    }
    if (possible.length === 0) {
      conditions.push('false');
      continue;
    }
    const alternatives = possible.flatMap((value) => [
      `d.doc @> ${parameter(JSON.stringify({ [field]: value }))}::jsonb`,
      `d.doc @> ${parameter(JSON.stringify({ [field]: [value] }))}::jsonb`,
    ]);
    conditions.push(`(${alternatives.join(' OR ')})`);
  }
  return conditions;
}
