/**
 * Every refusal or failure of an API call, with the HTTP status it maps to. Messages name the provider and the
 * field, never a header value or a secret, and never an internal address beyond what the tenant configured.
 */
export class ApiError extends Error {
  override readonly name = 'ApiError';
  constructor(
    readonly code: ApiErrorCode,
    message: string,
    readonly statusCode: 400 | 404 | 422 | 502 | 503 | 504,
    /** The status the upstream answered, when it answered at all. */
    readonly upstreamStatus?: number,
  ) {
    super(message);
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
