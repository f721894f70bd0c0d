import { FleetplaneError } from '../errors.js';

/**
 * A request that may not proceed. `statusCode` is 403 for every authorization failure (400 only for an
 * envelope that is not an envelope, 429 for an address past its failed-authentication limit, with
 * `retryAfterS`); `message` never names another organization or echoes a key.
 */
export class AuthorizationError extends FleetplaneError {
  override readonly name = 'AuthorizationError';
  declare readonly statusCode: 400 | 403 | 429;
  constructor(
    code: string,
    message: string,
    statusCode: 400 | 403 | 429 = 403,
    readonly retryAfterS?: number,
  ) {
    super(code, message, statusCode);
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
    super('invalid_input', message, 400);
  }
}
