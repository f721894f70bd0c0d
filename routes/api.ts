import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { FastifyReply, FastifyRequest, onErrorHookHandler } from 'fastify';
import { ApiPathParams, ApiPathRequest, ApiReply, ApiRequest, upstreamErrorReply } from '../schemas/api.js';
import { ENVELOPE_ERRORS, errorReply, permissionDenied } from '../schemas/errors.js';
import { API_ERRORS, ApiError } from '../src/api/errors.js';
import { FleetplaneError } from '../src/errors.js';

const SEGMENT = /^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$/;


/** Before validation: the raw shortcut is named as such, and `/api/<api>/<endpoint>` fills the body's names. */
function prepareEnvelope(request: FastifyRequest, _reply: FastifyReply, done: (error?: FleetplaneError) => void): void {
  // Callback style (no promise per request): a refusal goes to the error handler.
  done(checkEnvelope(request));
}

/** The refusal, when the request is refused. */
function checkEnvelope(request: FastifyRequest): FleetplaneError | undefined {
  const body = request.body;
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return undefined;
  if (Object.hasOwn(body, 'url')) {
    return API_ERRORS.urlNotSupported();
  }
  const wildcard = (request.params as { '*'?: string })['*'];
  if (!wildcard) return undefined;
  const segments = wildcard.split('/');
  if (segments.length > 2 || !segments.every((segment) => SEGMENT.test(segment))) {
    return API_ERRORS.invalidPath();
  }
  const named = body as Record<string, unknown>;
  for (const [field, value] of [['api', segments[0]], ['endpoint', segments[1]]] as const) {
    if (value === undefined) continue;
    if (named[field] !== undefined && named[field] !== value) return API_ERRORS.pathMismatch(field, String(named[field]), value);
    named[field] = value;
  }
  if (named.endpoint === undefined) return API_ERRORS.invalidRequest('endpoint: is required');
  return undefined;
}

/** An upstream's failure is logged here, with the provider and endpoint; the error handler answers it. */
const logFailure: onErrorHookHandler = (request, _reply, error, done) => {
  if (error instanceof ApiError && error.statusCode >= 500) {
    request.log.warn({ api: request.envelope?.api, endpoint: request.envelope?.endpoint, code: error.code, upstreamStatus: error.upstreamStatus }, 'api call failed');
  }
  done();
};

/** `POST /api`, `POST /api/*`: an authorized envelope → the organization's provider → `{ status, data }`. */
const api: FastifyPluginAsyncTypebox = async (app) => {
  const { api } = app.fleetplane;
  const responses = {
    200: ApiReply,
    400: errorReply(
      'The body is not valid JSON, or the envelope does not fit the endpoint',
      ENVELOPE_ERRORS.invalidJson,
      { code: 'invalid_request', message: 'method: is required' },
      { code: 'url_not_supported', message: 'url: there is no raw URL shortcut; name an api and an endpoint, requests never leave the provider baseUrl' },
      { code: 'method_mismatch', message: 'method: endpoint "create" of api "items" is "post", not "get"' },
      { code: 'invalid_path_parameter', message: 'data.id: path parameter is required' },
    ),
    403: errorReply('The key is missing, unknown, revoked or expired, or may not call this endpoint', ENVELOPE_ERRORS.notAuthorized, permissionDenied('post'), ENVELOPE_ERRORS.malformedAuthorization),
    404: errorReply('The organization has no such API provider or endpoint', { code: 'unknown_api', message: 'no api "items" in this organization' }, { code: 'unknown_endpoint', message: 'api "items" has no endpoint "archive"' }),
    413: errorReply('The body is larger than 1 MiB', ENVELOPE_ERRORS.tooLarge),
    422: errorReply('The stored provider definition is not valid', { code: 'invalid_provider', message: 'api "items" is not a valid provider: baseUrl: must be an http or https URL' }),
    502: upstreamErrorReply(
      'The upstream answered 5xx, an invalid or oversized reply, or could not be reached',
      { code: 'upstream_failed', message: 'provider "items" answered 500', upstreamStatus: 500 },
      { code: 'upstream_unreachable', message: 'provider "items" could not be reached' },
    ),
    503: errorReply(
      'API providers are not available on this server, or a provider header secret cannot be decrypted here',
      { code: 'unavailable', message: 'API providers are not available on this server' },
      { code: 'secret_unreadable', message: 'api "items" cannot be used: a header secret cannot be decrypted on this server' },
    ),
    504: upstreamErrorReply('The upstream did not answer within the provider timeout', { code: 'upstream_timeout', message: 'provider "items" did not answer within 10000 ms' }),
  };
  const handler = async (request: FastifyRequest) => {
    if (!api) throw API_ERRORS.unavailable();
    return api.send(request.envelope!);
  };
  const common = { tags: ['api'], security: [{ bearer: [] }], response: responses };

  app.post(
    '/api',
    {
      config: { envelope: true },
      schema: {
        ...common,
        operationId: 'callApi',
        summary: "Call an endpoint of one of the organization's API providers",
        description:
          'Names the provider (`api`) and its `endpoint`; `data` fills the path parameters and the rest becomes the JSON body ' +
          '(the query for get and head). The request goes only to the provider\'s `baseUrl`, with its configured headers, and ' +
          "the upstream's status and body come back as `{ status, data }` (its 4xx too); its failures are 502 and 504.",
        body: ApiRequest,
      },
      preValidation: prepareEnvelope,
      preHandler: app.authorizeEnvelope,
      onError: logFailure,
    },
    handler,
  );
  app.post(
    '/api/*',
    {
      config: { envelope: true },
      schema: {
        ...common,
        operationId: 'callApiByPath',
        summary: 'Call a provider endpoint named by the path: /api/<api>/<endpoint>',
        description: 'As `POST /api`, with the provider and endpoint in the path; a body that also names them must agree with it.',
        params: ApiPathParams,
        body: ApiPathRequest,
      },
      preValidation: prepareEnvelope,
      preHandler: app.authorizeEnvelope,
      onError: logFailure,
    },
    handler,
  );
};

export default api;
