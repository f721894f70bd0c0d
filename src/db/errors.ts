import { FleetplaneError, SHARED_CODES, errorAnswer, errorCode, type ErrorAnswer, type ErrorCode } from '../errors.js';

/**
 * Every code of the data layer, declared once with its HTTP status; the error classes below are their message
 * templates. `store_error` (anything unforeseen) and `schema_too_new` are the server's fault; the store being
 * down, busy, full or closed is 503; any other code is a refusal of the caller's input.
 */
export const STORE_CODES = {
  store_error: errorCode('store_error', 500),
  schema_too_new: errorCode('schema_too_new', 500),
  store_unsupported: errorCode('store_unsupported', 500),
  store_misconfigured: errorCode('store_misconfigured', 500),
  store_unavailable: errorCode('store_unavailable', 503),
  store_busy: errorCode('store_busy', 503),
  store_full: errorCode('store_full', 503),
  store_closed: errorCode('store_closed', 503),
  duplicate_key: errorCode('duplicate_key', 409),
  document_too_large: errorCode('document_too_large', 413),
  scope_violation: errorCode('scope_violation', 403),
  unknown_operator: errorCode('unknown_operator', 400),
  invalid_input: SHARED_CODES.invalidInput,
  /** A write that would put a secret in the store some other way than as one sealed value (see `SecretWriteError`). */
  secret_field: errorCode('secret_field', 400),
  invalid_secret: errorCode('invalid_secret', 400),
} satisfies Record<string, ErrorCode>;

export type StoreErrorCode = keyof typeof STORE_CODES;

/**
 * How long a caller is told to wait (`Retry-After`) before trying again an operation the store could not make now:
 * a restarting PostgreSQL is back in seconds, and an operation gives up after 8 s by default.
 */
export const STORE_RETRY_AFTER_S = 5;

/** Every failure of the data layer; `code` is stable and safe to show to a caller, `statusCode` its HTTP status. */
export class StoreError extends FleetplaneError {
  override readonly name: string = 'StoreError';
  constructor(message: string, code: StoreErrorCode = 'store_error', options?: { cause?: unknown }) {
    super(code, message, STORE_CODES[code].statusCode, options);
  }

  /** A store that cannot make the operation now (503) says when to try again. */
  override get headers(): Readonly<Record<string, string>> | undefined {
    return this.statusCode === 503 ? { 'retry-after': String(STORE_RETRY_AFTER_S) } : undefined;
  }

  /**
   * What the caller is told of a failure on the store's side, without its internals (the log has them): 503
   * `store_unavailable` for every kind of "not now" (down, busy, full, closed), 500 `store_misconfigured` when the
   * store refuses this server (credentials, database, rights). Undefined for an unforeseen failure (answered as
   * `internal`) and for a refusal of the caller's input (a 4xx, whose own message is shown).
   */
  get failureAnswer(): ErrorAnswer | undefined {
    if (this.statusCode === 503) return errorAnswer('store_unavailable', 'the data store is unavailable; try again later');
    if (this.code === 'store_misconfigured') return errorAnswer('store_misconfigured', 'the data store refused this server (credentials, database or rights); the server log says why');
    return undefined;
  }
}

/**
 * The store cannot be reached (or answered too late) and the outcome of the operation is unknown: a write may
 * or may not have happened. Callers answer 503 and may retry.
 */
export class StoreUnavailableError extends StoreError {
  override readonly name = 'StoreUnavailableError';
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, 'store_unavailable', options);
  }
}

/** A write would give two documents the same key of a unique index. */
export class DuplicateKeyError extends StoreError {
  override readonly name = 'DuplicateKeyError';
  constructor(
    readonly collection: string,
    readonly index: string,
    readonly key: unknown,
    options?: { cause?: unknown },
  ) {
    super(`duplicate key in ${collection} for index ${index}: ${JSON.stringify(key)}`, 'duplicate_key', options);
  }
}

/** A filter, update, projection or sort uses an operator outside the supported set. */
export class UnknownOperatorError extends StoreError {
  override readonly name = 'UnknownOperatorError';
  constructor(
    readonly operator: string,
    context: 'filter' | 'update' | 'projection' | 'sort',
  ) {
    super(`unknown ${context} operator ${operator}`, 'unknown_operator');
  }
}

/** A document (or an update's result) serializes to more than `MAX_DOCUMENT_BYTES`; `bytes` when known. */
export class DocumentTooLargeError extends StoreError {
  override readonly name = 'DocumentTooLargeError';
  constructor(
    readonly bytes: number | undefined,
    readonly limitBytes: number,
  ) {
    super(
      bytes === undefined ? `document is over the limit of ${limitBytes} bytes` : `document is ${bytes} bytes, over the limit of ${limitBytes} bytes`,
      'document_too_large',
    );
  }
}

/** Input that is not a valid document, filter, update or option (non-JSON values, `$` field names, ...). */
export class InvalidInputError extends StoreError {
  override readonly name = 'InvalidInputError';
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, 'invalid_input', options);
  }
}

/** A scoped handle was asked to leave its organization. */
export class ScopeError extends StoreError {
  override readonly name = 'ScopeError';
  constructor(message: string) {
    super(message, 'scope_violation');
  }
}
