import { StorageError } from './errors.js';

export type JsonValue = null | boolean | number | string | JsonValue[] | { [key: string]: JsonValue };

export const MAX_KEY_LENGTH = 256;
export const MAX_VALUE_BYTES = 256 * 1024;
/** As MongoDB's BSON limit; also keeps validation and JSON.stringify far from the stack limit. */
export const MAX_VALUE_DEPTH = 100;

const JSON_KINDS = 'null, booleans, finite numbers, strings, arrays and plain objects';

/** SPEC 4.1: a key is a non-empty string of at most 256 characters (UTF-16 code units, as `String.length`). */
export function checkKey(key: unknown): asserts key is string {
  if (typeof key !== 'string' || key.length === 0) {
    throw new StorageError('E_STORAGE_KEY_INVALID', `storage key must be a non-empty string, got ${typeof key === 'string' ? 'an empty string' : typeof key}`);
  }
  if (key.length > MAX_KEY_LENGTH) {
    throw new StorageError('E_STORAGE_KEY_TOO_LONG', `storage key is ${key.length} characters long; the limit is ${MAX_KEY_LENGTH}`);
  }
}

/**
 * SPEC 4.1: accepts only values that survive a JSON round trip unchanged (-0 is the one exception: it is stored
 * as 0) and serialize to at most 256 KiB of UTF-8. Returns a deeply frozen copy, so neither the caller nor a
 * listener can change what every process holds.
 */
export function toStoredValue(value: unknown): JsonValue {
  try {
    assertJson(value, [], new Set());
  } catch (error) {
    if (error instanceof StorageError) throw error;
    // A proxy trap or an exotic object threw while being inspected: not a JSON value either.
    throw new StorageError('E_STORAGE_VALUE_NOT_JSON', `storage value cannot be inspected as JSON: ${(error as Error)?.message ?? error}`, { cause: error });
  }
  const json = JSON.stringify(value);
  const bytes = Buffer.byteLength(json, 'utf8');
  if (bytes > MAX_VALUE_BYTES) {
    throw new StorageError('E_STORAGE_VALUE_TOO_LARGE', `storage value is ${bytes} bytes serialized; the limit is ${MAX_VALUE_BYTES} (256 KiB)`);
  }
  return freezeJson(JSON.parse(json) as JsonValue);
}

/** Freezes a value that is already known to be JSON (parsed from a message). */
export function freezeJson<T extends JsonValue>(value: T): T {
  if (typeof value === 'object' && value !== null) {
    for (const child of Array.isArray(value) ? value : Object.values(value)) freezeJson(child);
    Object.freeze(value);
  }
  return value;
}

type PathSegment = string | number;

function assertJson(value: unknown, path: PathSegment[], ancestors: Set<object>): void {
  switch (typeof value) {
    case 'string':
    case 'boolean':
      return;
    case 'number':
      if (!Number.isFinite(value)) notJson(path, `is ${value}, which JSON cannot represent`);
      return;
    case 'object':
      break;
    case 'bigint':
      return notJson(path, 'is a BigInt');
    default:
      return notJson(path, `is ${typeof value === 'undefined' ? 'undefined' : `a ${typeof value}`}`);
  }
  if (value === null) return;
  if (path.length >= MAX_VALUE_DEPTH) {
    throw new StorageError('E_STORAGE_VALUE_TOO_DEEP', `storage value at ${formatPath(path)} is nested deeper than ${MAX_VALUE_DEPTH} levels`);
  }
  if (ancestors.has(value)) notJson(path, 'refers to an object that contains it (a cycle)');
  ancestors.add(value);
  if (Array.isArray(value)) assertJsonArray(value, path, ancestors);
  else assertPlainObject(value, path, ancestors);
  ancestors.delete(value);
}

function assertJsonArray(array: unknown[], path: PathSegment[], ancestors: Set<object>): void {
  if (Object.getPrototypeOf(array) !== Array.prototype) notJson(path, 'is an array subclass');
  for (let index = 0; index < array.length; index++) {
    if (!(index in array)) notJson(path, `has an empty slot at index ${index}`);
    path.push(index);
    assertJson(array[index], path, ancestors);
    path.pop();
  }
  // Own keys of a plain array are its indexes and `length`; anything else would be dropped by JSON.
  if (Reflect.ownKeys(array).length !== array.length + 1) notJson(path, 'is an array with properties besides its elements');
}

function assertPlainObject(object: object, path: PathSegment[], ancestors: Set<object>): void {
  const prototype = Object.getPrototypeOf(object) as object | null;
  if (prototype !== Object.prototype && prototype !== null) {
    const name = (prototype as { constructor?: { name?: string } }).constructor?.name || 'non-plain object';
    notJson(path, `is a ${name}, not a plain object`);
  }
  for (const key of Reflect.ownKeys(object)) {
    if (typeof key === 'symbol') notJson(path, `has a symbol key ${String(key)}`);
    // Survives JSON, but merging such a value anywhere (Object.assign, spread) would replace a prototype.
    if (key === '__proto__') notJson(path, 'has a "__proto__" key');
    const descriptor = Object.getOwnPropertyDescriptor(object, key)!;
    if (!descriptor.enumerable) notJson(path, `has a non-enumerable property "${String(key)}"`);
    if (descriptor.get || descriptor.set) notJson(path, `has an accessor property "${String(key)}"`);
    path.push(key as string);
    assertJson(descriptor.value, path, ancestors);
    path.pop();
  }
}

function notJson(path: PathSegment[], problem: string): never {
  throw new StorageError('E_STORAGE_VALUE_NOT_JSON', `storage value at ${formatPath(path)} ${problem}; values must be JSON (${JSON_KINDS})`);
}

function formatPath(path: PathSegment[]): string {
  let text = '$';
  for (const segment of path) {
    if (typeof segment === 'number') text += `[${segment}]`;
    else text += /^[A-Za-z_$][\w$]*$/.test(segment) ? `.${segment}` : `[${JSON.stringify(segment)}]`;
  }
  return text;
}
