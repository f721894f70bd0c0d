/**
 * A request that may not proceed. `statusCode` is 403 for every authorization failure (400 only for an
 * envelope that is not an envelope, 429 for an address past its failed-authentication limit, with
 * `retryAfterS`); `message` never names another organization or echoes a key.
 */
export class AuthorizationError extends Error {
  override readonly name = 'AuthorizationError';
  constructor(
    readonly code: string,
    message: string,
    readonly statusCode: 400 | 403 | 429 = 403,
    readonly retryAfterS?: number,
  ) {
    super(message);
  }
}

/** Invalid input when creating organizations or keys (from the CLI or code). */
export class TenancyError extends Error {
  override readonly name = 'TenancyError';
}
