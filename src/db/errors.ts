import { FleetplaneError } from '../errors.js';

/** Every failure of the data layer; `code` is stable and safe to show to a caller. */
export class StoreError extends FleetplaneError {
  override readonly name: string = 'StoreError';
  constructor(message: string, code = 'store_error', options?: { cause?: unknown }) {
    super(code, message, 500, options);
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

/** A document (or an update's result) serializes to more than `MAX_DOCUMENT_BYTES`. */
export class DocumentTooLargeError extends StoreError {
  override readonly name = 'DocumentTooLargeError';
  constructor(
    readonly bytes: number,
    readonly limitBytes: number,
  ) {
    super(`document is ${bytes} bytes, over the limit of ${limitBytes} bytes`, 'document_too_large');
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
