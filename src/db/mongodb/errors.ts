import { MongoServerError } from 'mongodb';
import { DuplicateKeyError, InvalidInputError, StoreError } from '../errors.js';

/** Server codes for updates MongoDB refuses as invalid (type mismatch, conflicting paths, immutable `_id`, ...). */
const INVALID_INPUT_CODES = new Set([2, 9, 14, 28, 40, 52, 55, 56, 57, 66, 85, 86]);

/** Connection strings may carry credentials; they never reach a message. */
export function redactCredentials(text: string): string {
  return text.replace(/\/\/[^@/\s]*@/g, '//***@');
}

/** The driver's errors as the store's typed ones, so callers handle both backends alike. */
export function toStoreError(collection: string, error: unknown): Error {
  if (error instanceof StoreError) return error;
  if (error instanceof MongoServerError) {
    if (error.code === 11000) {
      const index = /index: (\S+) dup key/.exec(error.message)?.[1] ?? 'unknown';
      return new DuplicateKeyError(collection, index, error.keyValue ?? null, { cause: error });
    }
    if (typeof error.code === 'number' && INVALID_INPUT_CODES.has(error.code)) {
      return new InvalidInputError(redactCredentials(error.message), { cause: error });
    }
  }
  return new StoreError(`MongoDB ${collection}: ${redactCredentials((error as Error)?.message ?? String(error))}`, 'store_error', { cause: error });
}
