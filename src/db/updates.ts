import { InvalidInputError } from './errors.js';
import { mingoUpdater } from './mingo.js';
import { plainSet } from './plain-set.js';
import { isPlainObject } from './validate.js';
import type { Filter, Update } from './types.js';

const describe = (value: unknown) => (value === null ? 'null' : Array.isArray(value) ? 'an array' : `a ${typeof value}`);

/**
 * mingo quietly skips some updates MongoDB refuses (`$inc` on a string, `$set` through a scalar, `$push` to a
 * non-array). The embedded backend refuses them too, so both backends give the caller the same answer.
 */
function assertApplicable(document: Record<string, unknown>, operator: string, path: string): void {
  const segments = path.split('.');
  let node: unknown = document;
  for (const [i, segment] of segments.entries()) {
    const last = i === segments.length - 1;
    let next: unknown;
    if (Array.isArray(node)) {
      if (!/^\d+$/.test(segment)) {
        if (operator === '$unset') return;
        throw new InvalidInputError(`cannot apply ${operator} to "${path}": "${segments.slice(0, i).join('.')}" is an array`);
      }
      next = node[Number(segment)];
    } else if (isPlainObject(node)) {
      next = Object.hasOwn(node, segment) ? node[segment] : undefined;
    } else {
      if (operator === '$unset') return;
      throw new InvalidInputError(`cannot apply ${operator} to "${path}": "${segments.slice(0, i).join('.')}" is ${describe(node)}`);
    }
    if (next === undefined) return;
    if (last) {
      if (operator === '$inc' && typeof next !== 'number') throw new InvalidInputError(`cannot apply $inc to "${path}", which is ${describe(next)}`);
      if ((operator === '$push' || operator === '$addToSet' || operator === '$pull') && !Array.isArray(next)) {
        throw new InvalidInputError(`cannot apply ${operator} to "${path}", which is ${describe(next)}`);
      }
    }
    node = next;
  }
}

/** Applies a validated update in place; returns whether the document changed. */
export function applyUpdate(document: Record<string, unknown>, update: Update): boolean {
  for (const [operator, fields] of Object.entries(update)) {
    for (const path of Object.keys(fields)) assertApplicable(document, operator, path);
  }
  const plain = plainSet(document, update);
  if (plain !== undefined) return plain;
  try {
    return mingoUpdater().update(document, update).length > 0;
  } catch (error) {
    throw new InvalidInputError(`invalid update: ${(error as Error).message}`, { cause: error });
  }
}

/**
 * The document an upsert starts from: the filter's equality conditions (top level and inside `$and`), as
 * MongoDB builds it. Conditions with other operators (and `$or`) contribute nothing.
 */
export function seedFromFilter(filter: Filter): Record<string, unknown> {
  const fields: Record<string, unknown> = {};
  const collect = (clause: Filter) => {
    for (const [key, value] of Object.entries(clause)) {
      if (key === '$and') (value as Filter[]).forEach(collect);
      else if (key.startsWith('$')) continue;
      else if (isPlainObject(value) && Object.keys(value).some((name) => name.startsWith('$'))) {
        if (Object.hasOwn(value, '$eq')) fields[key] = value.$eq;
      } else fields[key] = value;
    }
  };
  collect(filter);
  // mingo (like MongoDB) refuses `$set` on `_id`, so the seed starts with it instead.
  const { _id, ...rest } = fields;
  const seed: Record<string, unknown> = _id === undefined ? {} : { _id };
  if (Object.keys(rest).length > 0) applyUpdate(seed, { $set: rest });
  return seed;
}
