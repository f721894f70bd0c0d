import { MongoError, MongoServerError, MongoWriteConcernError } from 'mongodb';
import { DocumentTooLargeError, DuplicateKeyError, InvalidInputError, StoreError, StoreUnavailableError } from '../errors.js';
import { MAX_DOCUMENT_BYTES } from '../validate.js';

/**
 * Server codes for input MongoDB refuses: type mismatches, conflicting paths, immutable `_id` (2, 9, 14, 28, 40,
 * 52, 55-57, 66, 85, 86), a field matched twice in an upsert's filter (54), parallel arrays in a unique index
 * (171), projection path collisions (31249, 31250).
 */
const INVALID_INPUT_CODES = new Set([2, 9, 14, 28, 40, 52, 54, 55, 56, 57, 66, 85, 86, 171, 31249, 31250]);
/** The BSON limit (16 MiB) reached by a document or by an update's result. */
const TOO_LARGE_CODES = new Set([10334, 17419]);
/**
 * The server cannot answer now (shutting down, stepping down, not primary, out of time, a host or socket
 * failure it reports itself): the operation may be retried, and a write may or may not have happened.
 */
const UNAVAILABLE_CODES = new Set([6, 7, 50, 89, 91, 112, 189, 251, 262, 9001, 10107, 11600, 11602, 13435, 13436]);
const UNAVAILABLE_LABELS = ['RetryableWriteError', 'TransientTransactionError', 'UnknownTransactionCommitResult', 'ResetPool', 'SystemOverloadedError'];
/** Driver errors (by name, so that every subclass counts) that mean no server could be reached or answered in time. */
const UNAVAILABLE_DRIVER_ERRORS = new Set([
  'MongoServerSelectionError',
  'MongoNetworkError',
  'MongoNetworkTimeoutError',
  'MongoOperationTimeoutError',
  'MongoTopologyClosedError',
  'MongoNotConnectedError',
  'MongoPoolClearedError',
  'MongoWaitQueueTimeoutError',
  'MongoExpiredSessionError',
]);

/** Connection strings may carry credentials; they never reach a message. */
export function redactCredentials(text: string): string {
  return text.replace(/\/\/[^@/\s]*@/g, '//***@');
}

function isUnavailable(error: MongoError): boolean {
  if (UNAVAILABLE_DRIVER_ERRORS.has(error.name)) return true;
  if (typeof error.code === 'number' && UNAVAILABLE_CODES.has(error.code)) return true;
  return UNAVAILABLE_LABELS.some((label) => error.hasErrorLabel(label));
}

/**
 * The driver's errors as the store's typed ones, so callers handle both backends alike: the caller's mistakes
 * are 4xx, an unreachable, slow or unacknowledging server is 503 `store_unavailable`, anything else 500.
 */
export function toStoreError(collection: string, error: unknown): Error {
  if (error instanceof StoreError) return error;
  const message = redactCredentials((error as Error)?.message ?? String(error));
  // Checked first: it is a MongoServerError too. The write happened on the primary, its replication is unknown.
  if (error instanceof MongoWriteConcernError) {
    return new StoreUnavailableError(`MongoDB ${collection}: the write was not acknowledged by enough replicas: ${message}`, { cause: error });
  }
  if (error instanceof MongoServerError) {
    if (error.code === 11000) {
      const index = /index: (\S+) dup key/.exec(error.message)?.[1] ?? 'unknown';
      return new DuplicateKeyError(collection, index, error.keyValue ?? null, { cause: error });
    }
    if (typeof error.code === 'number' && INVALID_INPUT_CODES.has(error.code)) return new InvalidInputError(message, { cause: error });
    if (typeof error.code === 'number' && TOO_LARGE_CODES.has(error.code)) return new DocumentTooLargeError(undefined, MAX_DOCUMENT_BYTES);
  }
  if (error instanceof MongoError && isUnavailable(error)) return new StoreUnavailableError(`MongoDB ${collection} is unavailable: ${message}`, { cause: error });
  return new StoreError(`MongoDB ${collection}: ${message}`, 'store_error', { cause: error });
}
