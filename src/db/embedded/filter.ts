import { InvalidInputError } from '../errors.js';
import { mingo } from '../mingo.js';
import type { Filter } from '../types.js';

type Row = Record<string, unknown>;
type Scalar = string | number | boolean | null;
export type RowTest = (document: Row) => boolean;

const isEqualityScalar = (value: unknown): value is Scalar =>
  value === null || typeof value === 'string' || typeof value === 'boolean' || (typeof value === 'number' && Number.isFinite(value));

/** A top-level field name whose value is read as is: no path, no operator. */
const isPlainField = (field: string) => field !== '__proto__' && !field.startsWith('$') && !field.includes('.');

function compileMingo(filter: Filter): RowTest {
  try {
    const query = new (mingo().Query)(filter, {});
    return (document) => query.test(document);
  } catch (error) {
    throw new InvalidInputError(`invalid filter: ${(error as Error).message}`, { cause: error });
  }
}

/**
 * A filter made only of `field: scalar` conditions on top-level fields, tested without building a query. The rule
 * is the query language's own: `null` matches null and missing fields, any other scalar matches a field of the
 * same type and value. A document whose field holds an array or an object is left to the full query, which
 * knows the array-element rules.
 */
function compileEquality(filter: Filter, entries: ReadonlyArray<readonly [string, Scalar]>): RowTest {
  let full: RowTest | undefined;
  return (document) => {
    for (const [field, expected] of entries) {
      const actual = Object.hasOwn(document, field) ? document[field] : undefined;
      if (actual !== null && typeof actual === 'object') return (full ??= compileMingo(filter))(document);
      if (expected === null ? actual !== null && actual !== undefined : actual !== expected) return false;
    }
    return true;
  };
}

/** The test a stored document must pass, or none for the empty filter. */
export function compileFilter(filter: Filter): RowTest | undefined {
  const entries = Object.entries(filter);
  if (entries.length === 0) return undefined;
  if (entries.every(([field, value]) => isPlainField(field) && isEqualityScalar(value))) return compileEquality(filter, entries as Array<[string, Scalar]>);
  return compileMingo(filter);
}
