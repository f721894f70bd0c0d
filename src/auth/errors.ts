import { FleetplaneError, SHARED_CODES, errorCode, errorEntry, type ErrorCode } from '../errors.js';

/**
 * A request that may not proceed. `statusCode` is 403 for every authorization failure (400 only for an
 * envelope that is not an envelope, 429 for an address past its failed-authentication limit, with
 * `retryAfterS`); `message` never names another organization or echoes a key.
 */
export class AuthorizationError extends FleetplaneError {
  override readonly name = 'AuthorizationError';
  constructor(
    declaration: ErrorCode,
    message: string,
    readonly retryAfterS?: number,
  ) {
    super(declaration.code, message, declaration.statusCode);
  }

  /** Past the failed-authentication limit, when the address may try again. */
  override get headers(): Readonly<Record<string, string>> | undefined {
    return this.retryAfterS === undefined ? undefined : { 'retry-after': String(this.retryAfterS) };
  }
}

/** Invalid input when creating organizations or keys (from the CLI or code). */
export class TenancyError extends FleetplaneError {
  override readonly name: string = 'TenancyError';
  constructor(message: string) {
    super(SHARED_CODES.invalidInput.code, message, SHARED_CODES.invalidInput.statusCode);
  }
}

/**
 * Refusals are answers, not faults: they are built without a stack trace, which would cost more than the rest
 * of a refusal, and anyone can cause thousands a second.
 */
function withoutStack<E>(build: () => E): E {
  const limit = Error.stackTraceLimit;
  Error.stackTraceLimit = 0;
  try {
    return build();
  } finally {
    Error.stackTraceLimit = limit;
  }
}

const entry = <Args extends unknown[]>(declaration: ErrorCode, message: (...args: Args) => string) =>
  errorEntry(declaration, (declared, ...args: Args) => withoutStack(() => new AuthorizationError(declared, message(...args))));

/** Every refusal of authorization (SPEC 8), declared once with its status. */
export const AUTH_ERRORS = {
  invalidEnvelope: entry(SHARED_CODES.invalidEnvelope, (reason: string) => reason),
  /**
   * SPEC 8.7: the one answer for an unknown host, an unknown key, a wrong secret, another organization's key, a
   * key used on a host outside its list, and a request without a key that its host does not allow (no reason:
   * see `refused`). With a reason, a refusal whatever the key: a method only the server's own processes send
   * (`internalViolation`), as host control where it is off is refused to every key.
   */
  forbidden: entry(SHARED_CODES.forbidden, (reason?: string) => reason ?? 'this request is not authorized here'),
  malformedAuthorization: entry(errorCode('malformed_authorization', 403), () => 'the Authorization header must be "Bearer <key>"'),
  malformedKey: entry(errorCode('malformed_key', 403), (reason: string) => reason),
  conflictingKeys: entry(errorCode('conflicting_keys', 403), () => 'the Authorization header and the envelope carry different keys'),
  keyRevoked: entry(errorCode('key_revoked', 403), () => 'this key has been revoked'),
  keyExpired: entry(errorCode('key_expired', 403), () => 'this key has expired'),
  permissionDenied: entry(errorCode('permission_denied', 403), (method: string) => `this key may not call "${method}"`),
  platformOnly: entry(SHARED_CODES.platformOnly, (reason: string) => reason),
  /** SPEC 8.7: whatever failed, the same answer once an address is past its failed-authentication limit. */
  tooManyRequests: errorEntry(errorCode('too_many_requests', 429), (declared, retryAfterS: number) =>
    withoutStack(() => new AuthorizationError(declared, `too many failed authentications from this address: retry in ${retryAfterS} s`, retryAfterS)),
  ),
  /** A server without an authorization service authorizes nothing. */
  authorizationUnavailable: entry(errorCode('authorization_unavailable', 403), () => 'authorization is not available'),
  /** Authorization itself failed (logged in full): the request is refused all the same. */
  authorizationFailed: entry(errorCode('authorization_failed', 403), () => 'the request could not be authorized'),
  invalidInput: errorEntry(SHARED_CODES.invalidInput, (_declared, reason: string) => new TenancyError(reason)),
};
