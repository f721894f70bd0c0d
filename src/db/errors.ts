import { FleetplaneError } from '../errors.js';

/**
 * The HTTP status each code stands for. `store_error` (anything unforeseen) and `schema_too_new` are the
 * server's fault; the store being down, busy, full or closed is 503 `store_unavailable`-like; any other code is a
 * refusal of the caller's input.
 */
const STATUS_BY_CODE: Readonly<Record<string, number>> = {
  store_error: 500,
  schema_too_new: 500,
  store_unsupported: 500,
  store_misconfigured: 500,
  store_unavailable: 503,
  store_busy: 503,
  store_full: 503,
  store_closed: 503,
  duplicate_key: 409,
  document_too_large: 413,
  scope_violation: 403,
};

/** Every failure of the data layer; `code` is stable and safe to show to a caller, `statusCode` its HTTP status. */
export class StoreError extends FleetplaneError {
  override readonly name: string = 'StoreError';
  constructor(message: string, code = 'store_error', options?: { cause?: unknown }) {
    super(code, message, STATUS_BY_CODE[code] ?? 400, options);
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
