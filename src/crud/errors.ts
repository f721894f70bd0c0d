import { FleetplaneError, SHARED_CODES, errorCode, errorEntry, type ErrorCode } from '../errors.js';
import { STORE_CODES, type StoreError } from '../db/errors.js';

/** A CRUD envelope refused or failed; `code` and `message` are safe to show to the caller. */
export class CrudError extends FleetplaneError {
  override readonly name = 'CrudError';
  constructor(declaration: ErrorCode, message: string) {
    super(declaration.code, message, declaration.statusCode, { expose: true });
  }

  /** The same refusal of one document among several: its code and status, the message prefixed. */
  within(prefix: string): CrudError {
    // The error is its own declaration: its code and status.
    return new CrudError(this, `${prefix}${this.message}`);
  }
}

const entry = <Args extends unknown[]>(declaration: ErrorCode, message: (...args: Args) => string) =>
  errorEntry(declaration, (declared, ...args: Args) => new CrudError(declared, message(...args)));

/** Every refusal of a CRUD envelope (SPEC 7.3), declared once with its status; the store's refusals keep their codes. */
export const CRUD_ERRORS = {
  invalidEnvelope: entry(SHARED_CODES.invalidEnvelope, (reason: string) => reason),
  invalidCollection: entry(errorCode('invalid_collection', 400), (name: string, prefixes: string) => `collection: "${name}" is internal to the store (names starting with ${prefixes} are reserved)`),
  collectionLimit: entry(errorCode('collection_limit', 400), (name: string, limit: number) => `collection: "${name}" would be over this organization's limit of ${limit} collections`),
  readOnly: entry(errorCode('read_only', 400), () => 'organizations are changed with "fleetplane apply" or "fleetplane init", not through /crud'),
  invalidDocument: entry(errorCode('invalid_document', 400), (reason: string) => reason),
  invalidPolicy: entry(errorCode('invalid_policy', 400), (reason: string) => reason),
  secretField: entry(STORE_CODES.secret_field, (path: string, field: string) => `${path}: ${field} holds secrets and cannot be queried`),
  forbidden: entry(SHARED_CODES.forbidden, (reason: string) => reason),
  platformOnly: entry(SHARED_CODES.platformOnly, (reason: string) => reason),
  duplicateKey: entry(STORE_CODES.duplicate_key, (index: string) => `a document with the same ${index} already exists`),
  documentTooLarge: entry(STORE_CODES.document_too_large, (reason: string) => reason),
  storeUnavailable: entry(STORE_CODES.store_unavailable, () => 'the data store is unavailable; try again later'),
  unavailable: entry(SHARED_CODES.unavailable, () => 'the data store is not available on this server'),
};

/** Any other refusal of the store, answered with the store's own code and status. */
export const storeRefusal = (error: StoreError) => new CrudError(error, error.message);
