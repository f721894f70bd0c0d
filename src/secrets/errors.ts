import { FleetplaneError, errorCode } from '../errors.js';
import { StoreError } from '../db/errors.js';

/**
 * The codes of secrets at rest, declared once with their status. A key that cannot be had is the server's
 * fault (500); a stored secret that cannot be opened here is unavailable here (503): another server, or this one
 * with the right key, opens it. Neither message is shown to a caller; the API and webhooks answer with their own.
 * The refusals of a secret's write are the store's codes (`STORE_CODES.secret_field`, `invalid_secret`).
 */
export const SECRET_CODES = {
  secretKeyUnavailable: errorCode('secret_key_unavailable', 500),
  secretUnreadable: errorCode('secret_unreadable', 503),
};

/**
 * The key that seals secrets at rest cannot be had: a malformed `FLEETPLANE_SECRETS_KEY`, a key file that is
 * unreadable, malformed or open to other users. Messages name the variable or the file, never key material.
 */
export class SecretKeyError extends FleetplaneError {
  override readonly name = 'SecretKeyError';
  constructor(
    message: string,
    /** Where the bad key came from: an environment variable (operator input) or the key file. */
    readonly source: 'env' | 'file',
    options?: { cause?: unknown },
  ) {
    super(SECRET_CODES.secretKeyUnavailable.code, message, SECRET_CODES.secretKeyUnavailable.statusCode, options);
  }
}

/** A stored secret that cannot be opened here; the message names its field and why, never a value. */
export class SecretUnreadableError extends FleetplaneError {
  override readonly name = 'SecretUnreadableError';
  constructor(
    message: string,
    readonly reason: 'unknown_key' | 'rejected' | 'malformed' | 'no_keyring',
  ) {
    super(SECRET_CODES.secretUnreadable.code, message, SECRET_CODES.secretUnreadable.statusCode);
  }
}

/**
 * A write that would put a secret in the store some other way than as one sealed value: a `$push`, `$inc`... on
 * a secret field, a non-string secret, or a sealed value that does not belong where it is written. A store
 * error with its own code, so CRUD answers 400 with the message.
 */
export class SecretWriteError extends StoreError {
  override readonly name = 'SecretWriteError';
  constructor(message: string, code: 'secret_field' | 'invalid_secret' = 'secret_field') {
    super(message, code);
  }
}
