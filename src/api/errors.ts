import { FleetplaneError } from '../errors.js';

/**
 * Every refusal or failure of an API call, with the HTTP status it maps to. Messages name the provider and the
 * field, never a header value or a secret, and never an internal address beyond what the tenant configured.
 */
export class ApiError extends FleetplaneError {
  override readonly name = 'ApiError';
  declare readonly code: ApiErrorCode;
  declare readonly statusCode: 400 | 404 | 422 | 502 | 503 | 504;
  constructor(
    code: ApiErrorCode,
    message: string,
    statusCode: 400 | 404 | 422 | 502 | 503 | 504,
    /** The status the upstream answered, when it answered at all. */
    readonly upstreamStatus?: number,
    /** For a call that timed out: the time it was given. */
    readonly timeoutMs?: number,
  ) {
    // An upstream's failure is the caller's to know: its 5xx answers say what failed too.
    super(code, message, statusCode, { expose: true });
  }

  override get details(): Readonly<Record<string, unknown>> | undefined {
    return this.upstreamStatus === undefined ? undefined : { upstreamStatus: this.upstreamStatus };
  }
}

export type ApiErrorCode =
  | 'invalid_envelope'
  | 'invalid_path_parameter'
  | 'unknown_api'
  | 'unknown_endpoint'
  | 'method_mismatch'
  | 'invalid_provider'
  | 'upstream_failed'
  | 'upstream_unreachable'
  | 'upstream_invalid_reply'
  | 'upstream_too_large'
  | 'upstream_timeout'
  | 'secret_unreadable'
  | 'unavailable';

export const invalidEnvelope = (message: string) => new ApiError('invalid_envelope', message, 400);
