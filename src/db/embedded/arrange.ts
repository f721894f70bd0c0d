import type { FindOptions } from '../types.js';
import { mingo } from '../mingo.js';

type Row = Record<string, unknown>;

/** A top-level field name read as is: no path, no operator. */
const isPlainField = (field: string) => field !== '__proto__' && !field.startsWith('$') && !field.includes('.');

/**
 * Sorted as the query language sorts, without loading it when it can be done directly: no more than one row,
 * or one top-level field whose values are all strings or all numbers. Rows are grouped by value in their order,
 * the values ordered (strings by UTF-16 code units, numbers numerically), reversed for -1: the same order the
 * full sort gives for such values. Anything else (several fields, paths, missing or mixed values) goes to it.
 */
function sortRows(rows: Row[], sort: NonNullable<FindOptions['sort']>): Row[] {
  if (rows.length <= 1) return rows;
  const fields = Object.keys(sort);
  const field = fields[0]!;
  if (fields.length === 1 && isPlainField(field)) {
    const groups = new Map<string | number, Row[]>();
    let strings = true;
    let numbers = true;
    for (const row of rows) {
      const value = Object.hasOwn(row, field) ? row[field] : undefined;
      strings &&= typeof value === 'string';
      numbers &&= typeof value === 'number' && !Number.isNaN(value);
      if (!strings && !numbers) break;
      const group = groups.get(value as string | number);
      if (group) group.push(row);
      else groups.set(value as string | number, [row]);
    }
    if (strings || numbers) {
      const values = [...groups.keys()];
      if (strings) values.sort();
      else values.sort((a, b) => (a as number) - (b as number));
      if (sort[field] === -1) values.reverse();
      return values.flatMap((value) => groups.get(value)!);
    }
  }
  return new (mingo().Query)({}, {}).find<Row>(rows).sort(sort).all();
}

/**
 * A projection of top-level fields applied directly, as the query language applies it: an inclusion keeps the
 * named fields in the document's order (`_id` among them when named, else last unless excluded); an exclusion
 * drops the named fields. Paths, an empty projection and `_id: 1` beside exclusions go to the full query language.
 */
function projectRows(rows: Row[], projection: NonNullable<FindOptions['projection']>): Row[] {
  const entries = Object.entries(projection);
  const others = entries.filter(([field]) => field !== '_id');
  const id = Object.hasOwn(projection, '_id') ? Boolean(projection._id) : undefined;
  const inclusion = others.length > 0 ? Boolean(others[0]![1]) : id === true;
  const simple = entries.length > 0 && entries.every(([field]) => isPlainField(field)) && !(!inclusion && id === true && others.length > 0);
  if (!simple) return new (mingo().Query)({}, {}).find<Row>(rows, projection as Record<string, unknown>).all();
  const named = new Set(others.map(([field]) => field));
  const keepId = id !== false;
  return rows.map((row) => {
    const out: Row = {};
    for (const field of Object.keys(row)) {
      if (field === '_id' ? (inclusion ? id === true : keepId) : named.has(field) === inclusion) out[field] = row[field];
    }
    if (inclusion && id === undefined && Object.hasOwn(row, '_id')) out._id = row._id;
    return out;
  });
}

/** Sort, then limit, then projection: the order the query language's cursor applies them in. */
export function arrange(rows: Row[], sort: FindOptions['sort'], limit: number, projection: FindOptions['projection']): Row[] {
  let out = sort ? sortRows(rows, sort) : rows;
  if (limit > 0 && out.length > limit) out = out.slice(0, limit);
  return projection ? projectRows(out, projection) : out;
}
