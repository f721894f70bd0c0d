import { DocumentTooLargeError, InvalidInputError, UnknownOperatorError } from './errors.js';
import type { FindOptions, NewDocument } from './types.js';

/**
 * 1 MiB: documents are control-plane records (keys, inventory, workflow definitions). The limit matches the
 * HTTP body limit, so anything a request can carry fits, and it bounds the JSON parse cost of a full scan.
 */
export const MAX_DOCUMENT_BYTES = 1024 * 1024;
/** MongoDB's own nesting limit; it also keeps the recursive walks below far from the stack limit. */
export const MAX_DEPTH = 100;

/**
 * Exactly the operators of SPEC 7.1. Both backends refuse everything else (even what mingo or MongoDB would
 * understand, such as `$where` or `$regex`), so a filter that works on one backend works on the other and
 * caller-supplied filters cannot run code or pathological regular expressions.
 */
export const FILTER_OPERATORS: ReadonlySet<string> = new Set(['$eq', '$ne', '$in', '$nin', '$exists', '$gt', '$gte', '$lt', '$lte']);
export const LOGICAL_OPERATORS: ReadonlySet<string> = new Set(['$and', '$or']);
export const UPDATE_OPERATORS: ReadonlySet<string> = new Set(['$set', '$unset', '$inc', '$push', '$pull', '$addToSet']);
const FORBIDDEN_SEGMENTS = new Set(['__proto__', 'constructor', 'prototype']);
const MAX_ID_LENGTH = 256;

export function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (value === null || typeof value !== 'object') return false;
  const proto = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
}

const hasOperatorKey = (value: Record<string, unknown>) => Object.keys(value).some((key) => key.startsWith('$'));

/** A dotted path of field names: no empty segment, no operator, nothing that reaches an object's prototype. */
function assertFieldPath(path: string, context: 'filter' | 'update' | 'projection' | 'sort'): void {
  for (const segment of path.split('.')) {
    if (segment === '') throw new InvalidInputError(`empty segment in field path "${path}"`);
    if (segment.includes('\0')) throw new InvalidInputError(`field path ${JSON.stringify(path)} holds a NUL character`);
    if (segment.startsWith('$')) throw new UnknownOperatorError(segment, context);
    if (FORBIDDEN_SEGMENTS.has(segment)) throw new InvalidInputError(`field path "${path}" is not allowed`);
  }
}

/**
 * JSON values only; `documentKeys` adds the rule for stored field names: not empty, no `$` prefix. Dots are
 * allowed because permission maps are keyed by dotted method names (`object.read`); such a field is stored and
 * read back whole but cannot be addressed by a dotted path, as in MongoDB (5.0 or later stores them alike).
 */
function assertJsonValue(value: unknown, where: string, documentKeys: boolean, depth = 0): void {
  if (depth > MAX_DEPTH) throw new InvalidInputError(`${where} is nested deeper than ${MAX_DEPTH} levels`);
  switch (typeof value) {
    case 'string':
    case 'boolean':
      return;
    case 'number':
      if (!Number.isFinite(value)) throw new InvalidInputError(`${where} holds a non-finite number`);
      return;
    case 'object':
      if (value === null) return;
      if (Array.isArray(value)) {
        for (const item of value) {
          if (item === undefined) throw new InvalidInputError(`${where} holds undefined in an array`);
          assertJsonValue(item, where, documentKeys, depth + 1);
        }
        return;
      }
      if (!isPlainObject(value)) throw new InvalidInputError(`${where} holds a non-JSON object (${value.constructor?.name ?? 'unknown'}); store dates as ISO strings`);
      for (const [key, item] of Object.entries(value)) {
        if (key === '__proto__') throw new InvalidInputError(`${where} holds a "__proto__" field`);
        // BSON field names are C strings: MongoDB cannot store one with a NUL, so neither backend does.
        if (key.includes('\0')) throw new InvalidInputError(`${where} holds a field name with a NUL character`);
        if (documentKeys && (key.startsWith('$') || key === '')) {
          throw new InvalidInputError(`${where} holds an invalid field name "${key}" (empty or "$" prefix)`);
        }
        if (item !== undefined) assertJsonValue(item, where, documentKeys, depth + 1);
      }
      return;
    default:
      throw new InvalidInputError(`${where} holds a ${typeof value}, which is not JSON`);
  }
}

/** Validates a document and returns its JSON text, within the size limit. */
export function serializeDocument(document: NewDocument): string {
  if (!isPlainObject(document)) throw new InvalidInputError('a document must be a plain object');
  if (document._id !== undefined && (typeof document._id !== 'string' || document._id.length === 0 || document._id.length > MAX_ID_LENGTH)) {
    throw new InvalidInputError(`_id must be a non-empty string of at most ${MAX_ID_LENGTH} characters`);
  }
  assertJsonValue(document, 'document', true);
  const text = JSON.stringify(document);
  const bytes = Buffer.byteLength(text);
  if (bytes > MAX_DOCUMENT_BYTES) throw new DocumentTooLargeError(bytes, MAX_DOCUMENT_BYTES);
  return text;
}

function assertCondition(value: unknown, path: string): void {
  if (value === undefined) throw new InvalidInputError(`filter field "${path}" is undefined`);
  if (!isPlainObject(value) || !hasOperatorKey(value)) return assertJsonValue(value, `filter field "${path}"`, false);
  for (const [operator, argument] of Object.entries(value)) {
    if (!operator.startsWith('$')) throw new InvalidInputError(`filter field "${path}" mixes operators and fields`);
    if (!FILTER_OPERATORS.has(operator)) throw new UnknownOperatorError(operator, 'filter');
    if ((operator === '$in' || operator === '$nin') && !Array.isArray(argument)) throw new InvalidInputError(`${operator} of "${path}" needs an array`);
    if (operator === '$exists' && typeof argument !== 'boolean') throw new InvalidInputError(`$exists of "${path}" needs true or false`);
    if (argument === undefined) throw new InvalidInputError(`${operator} of "${path}" is undefined`);
    assertJsonValue(argument, `${operator} of "${path}"`, false);
  }
}

export function assertFilter(filter: unknown, depth = 0): asserts filter is Record<string, unknown> {
  if (!isPlainObject(filter)) throw new InvalidInputError('a filter must be a plain object');
  if (depth > MAX_DEPTH) throw new InvalidInputError(`filter is nested deeper than ${MAX_DEPTH} levels`);
  for (const [key, value] of Object.entries(filter)) {
    if (key.startsWith('$')) {
      if (!LOGICAL_OPERATORS.has(key)) throw new UnknownOperatorError(key, 'filter');
      if (!Array.isArray(value) || value.length === 0) throw new InvalidInputError(`${key} needs a non-empty array of filters`);
      for (const clause of value) assertFilter(clause, depth + 1);
      continue;
    }
    assertFieldPath(key, 'filter');
    assertCondition(value, key);
  }
}

function assertPushValue(value: unknown, where: string): void {
  if (isPlainObject(value) && hasOperatorKey(value)) {
    for (const modifier of Object.keys(value)) if (modifier !== '$each') throw new UnknownOperatorError(modifier, 'update');
    if (!Array.isArray(value.$each)) throw new InvalidInputError(`$each of ${where} needs an array`);
    return assertJsonValue(value.$each, where, true);
  }
  assertJsonValue(value, where, true);
}

function assertPullValue(value: unknown, path: string): void {
  if (!isPlainObject(value)) return assertJsonValue(value, `$pull of "${path}"`, true);
  // An object is a condition on the array's elements: operators on scalars, or a filter on sub-documents.
  const keys = Object.keys(value);
  if (keys.length > 0 && keys.every((key) => FILTER_OPERATORS.has(key))) return assertCondition(value, path);
  assertFilter(value);
}

export function assertUpdate(update: unknown): void {
  if (!isPlainObject(update) || Object.keys(update).length === 0) throw new InvalidInputError('an update must be a non-empty object of operators');
  for (const [operator, fields] of Object.entries(update)) {
    if (!operator.startsWith('$')) throw new InvalidInputError('an update needs operators such as $set; replacement documents are not supported');
    if (!UPDATE_OPERATORS.has(operator)) throw new UnknownOperatorError(operator, 'update');
    if (!isPlainObject(fields) || Object.keys(fields).length === 0) throw new InvalidInputError(`${operator} needs a non-empty object of fields`);
    for (const [path, value] of Object.entries(fields)) {
      assertFieldPath(path, 'update');
      if (path === '_id' || path.startsWith('_id.')) throw new InvalidInputError('_id is immutable');
      if (value === undefined) throw new InvalidInputError(`${operator} of "${path}" is undefined`);
      const where = `${operator} of "${path}"`;
      if (operator === '$inc') {
        if (typeof value !== 'number' || !Number.isFinite(value)) throw new InvalidInputError(`${where} needs a finite number`);
      } else if (operator === '$push' || operator === '$addToSet') assertPushValue(value, where);
      else if (operator === '$pull') assertPullValue(value, path);
      else if (operator === '$set') assertJsonValue(value, where, true);
    }
  }
  const bytes = Buffer.byteLength(JSON.stringify(update));
  if (bytes > MAX_DOCUMENT_BYTES) throw new DocumentTooLargeError(bytes, MAX_DOCUMENT_BYTES);
}

export function assertFindOptions(options: FindOptions): void {
  if (!isPlainObject(options)) throw new InvalidInputError('find options must be an object');
  const { sort, limit, projection } = options;
  if (limit !== undefined && (typeof limit !== 'number' || !Number.isSafeInteger(limit) || limit < 0)) throw new InvalidInputError('limit must be a non-negative integer (0 = no limit)');
  if (sort !== undefined) {
    if (!isPlainObject(sort)) throw new InvalidInputError('sort must be an object of field: 1 | -1');
    if (Object.keys(sort).length === 0) throw new InvalidInputError('sort: must name at least one field');
    for (const [path, direction] of Object.entries(sort)) {
      assertFieldPath(path, 'sort');
      if (direction !== 1 && direction !== -1) throw new InvalidInputError(`sort of "${path}" must be 1 or -1`);
    }
  }
  if (projection !== undefined) {
    if (!isPlainObject(projection)) throw new InvalidInputError('projection must be an object of field: 0 | 1');
    const modes = new Set<boolean>();
    for (const [path, value] of Object.entries(projection)) {
      assertFieldPath(path, 'projection');
      if (value !== 0 && value !== 1 && value !== true && value !== false) throw new InvalidInputError(`projection of "${path}" must be 0 or 1`);
      if (path !== '_id') modes.add(Boolean(value));
    }
    if (modes.size > 1) throw new InvalidInputError('a projection cannot mix inclusion and exclusion (except _id)');
  }
}
