import { SECRET_CODES } from '../secrets/errors.js';
import { FleetplaneError, SHARED_CODES, errorCode, errorEntry, type ErrorCode, type ErrorLogLine } from '../errors.js';

/** What an upstream's failure carries besides its message. */
export interface UpstreamFacts {
  /** The status the upstream answered, when it answered at all. */
  upstreamStatus?: number;
  /** For a call that timed out: the time it was given. */
  timeoutMs?: number;
}

/**
 * Every refusal or failure of an API call, with the HTTP status it maps to. Messages name the provider and the
 * field, never a header value or a secret, and never an internal address beyond what the tenant configured.
 */
export class ApiError extends FleetplaneError {
  override readonly name = 'ApiError';
  readonly upstreamStatus?: number;
  readonly timeoutMs?: number;
  constructor(declaration: ErrorCode, message: string, facts: UpstreamFacts = {}) {
    // An upstream's failure is the caller's to know: its 5xx answers say what failed too.
    super(declaration.code, message, declaration.statusCode, { expose: true });
    this.upstreamStatus = facts.upstreamStatus;
    this.timeoutMs = facts.timeoutMs;
  }

  override get details(): Readonly<Record<string, unknown>> | undefined {
    return this.upstreamStatus === undefined ? undefined : { upstreamStatus: this.upstreamStatus };
  }

  override get logLine(): ErrorLogLine | undefined {
    const line = super.logLine;
    return line && { ...line, fields: { ...line.fields, upstreamStatus: this.upstreamStatus } };
  }
}

const entry = <Args extends unknown[]>(declaration: ErrorCode, message: (...args: Args) => string, facts?: (...args: Args) => UpstreamFacts) =>
  errorEntry(declaration, (declared, ...args: Args) => new ApiError(declared, message(...args), facts?.(...args)));

/** Every error of an API call (SPEC 10), declared once with its status. */
export const API_ERRORS = {
  invalidEnvelope: entry(SHARED_CODES.invalidEnvelope, (reason: string) => reason),
  invalidRequest: entry(SHARED_CODES.invalidRequest, (reason: string) => reason),
  /** The body names a raw URL: requests never leave the provider's baseUrl. */
  urlNotSupported: entry(errorCode('url_not_supported', 400), () => 'url: there is no raw URL shortcut; name an api and an endpoint, requests never leave the provider baseUrl'),
  invalidPath: entry(errorCode('invalid_path', 400), () => 'the path must be /api/<api> or /api/<api>/<endpoint>'),
  pathMismatch: entry(errorCode('path_mismatch', 400), (field: string, inBody: string, inPath: string) => `${field}: the body says "${inBody}", the path "${inPath}"`),
  invalidPathParameter: entry(errorCode('invalid_path_parameter', 400), (name: string, reason: string) => `data.${name}: ${reason}`),
  unknownApi: entry(errorCode('unknown_api', 404), (api: string) => `no api "${api}" in this organization`),
  unknownEndpoint: entry(errorCode('unknown_endpoint', 404), (api: string, endpoint: string) => `api "${api}" has no endpoint "${endpoint}"`),
  methodMismatch: entry(
    SHARED_CODES.methodMismatch,
    (api: string, endpoint: string, method: string, given: string) => `method: endpoint "${endpoint}" of api "${api}" is "${method}", not "${given}"`,
  ),
  invalidProvider: entry(errorCode('invalid_provider', 422), (api: string, reason: string) => `api "${api}" is not a valid provider: ${reason}`),
  /** SPEC 10.4: the provider's host is one a tenant may not reach; nothing was sent to it. */
  egressRefused: entry(
    errorCode('egress_refused', 403),
    (api: string, host: string, rule: string) => `provider "${api}": the egress policy refuses ${host} (${rule === 'own-address' ? "this server's own address" : `${rule} address`}); the platform can allow it in egress.allow`,
  ),
  upstreamFailed: entry(
    errorCode('upstream_failed', 502),
    (api: string, upstreamStatus: number) => `provider "${api}" answered ${upstreamStatus}`,
    (_api, upstreamStatus) => ({ upstreamStatus }),
  ),
  /** Never reached, or (with the status it began to answer) broke off its reply. */
  upstreamUnreachable: entry(
    errorCode('upstream_unreachable', 502),
    (api: string, upstreamStatus?: number) => `provider "${api}" ${upstreamStatus === undefined ? 'could not be reached' : 'broke off its reply'}`,
    (_api: string, upstreamStatus?: number) => ({ upstreamStatus }),
  ),
  upstreamInvalidReply: entry(
    errorCode('upstream_invalid_reply', 502),
    (api: string, _upstreamStatus: number) => `provider "${api}" answered invalid JSON`,
    (_api, upstreamStatus) => ({ upstreamStatus }),
  ),
  upstreamTooLarge: entry(errorCode('upstream_too_large', 502), (api: string, maxBytes: number) => `provider "${api}" answered more than ${maxBytes} bytes`),
  upstreamTimeout: entry(
    errorCode('upstream_timeout', 504),
    (api: string, timeoutMs: number) => `provider "${api}" did not answer within ${timeoutMs} ms`,
    (_api, timeoutMs) => ({ timeoutMs }),
  ),
  secretUnreadable: entry(SECRET_CODES.secretUnreadable, (api: string) => `api "${api}" cannot be used: a header secret cannot be decrypted on this server`),
  unavailable: entry(SHARED_CODES.unavailable, () => 'API providers are not available on this server'),
};
