import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { FailureLog } from '../plugins/errors.js';
import { ApiPathParams, ApiPathRequest, ApiReply, ApiRequest, upstreamErrorReply } from '../schemas/api.js';
import { ENVELOPE_ERRORS, errorReply, permissionDenied } from '../schemas/errors.js';
import { API_ERRORS } from '../src/api/errors.js';
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

/** An upstream's failure is logged by the error handler naming the provider and endpoint. */
const failureLog: FailureLog = { message: 'api call failed', context: (request) => ({ api: request.envelope?.api, endpoint: request.envelope?.endpoint }) };

/** `POST /api`, `POST /api/*`: an authorized envelope → the organization's provider → `{ status, data }`. */
const api: FastifyPluginAsyncTypebox = async (app) => {
  const { api } = app.fleetplane;
  const responses = {
    200: ApiReply,
    400: errorReply(
      'The body is not valid JSON, or the envelope does not fit the endpoint',
      ENVELOPE_ERRORS.invalidJson,
      API_ERRORS.invalidRequest.example('method: is required'),
      API_ERRORS.urlNotSupported.example(),
      API_ERRORS.pathMismatch.example('api', 'items', 'orders'),
      API_ERRORS.methodMismatch.example('items', 'create', 'post', 'get'),
      API_ERRORS.invalidPathParameter.example('id', 'path parameter is required'),
    ),
    403: errorReply(
      "The key is missing, unknown, revoked or expired, or may not call this endpoint; or the egress policy refuses the provider's address",
      ENVELOPE_ERRORS.notAuthorized,
      permissionDenied('post'),
      ENVELOPE_ERRORS.malformedAuthorization,
      API_ERRORS.egressRefused.example('items', '169.254.169.254', 'link-local'),
    ),
    404: errorReply('The organization has no such API provider or endpoint', API_ERRORS.unknownApi.example('items'), API_ERRORS.unknownEndpoint.example('items', 'archive')),
    413: errorReply('The body is larger than 1 MiB', ENVELOPE_ERRORS.tooLarge),
    422: errorReply('The stored provider definition is not valid', API_ERRORS.invalidProvider.example('items', 'baseUrl: must be an http or https URL')),
    502: upstreamErrorReply(
      'The upstream answered 5xx, an invalid or oversized reply, or could not be reached',
      API_ERRORS.upstreamFailed.example('items', 500),
      API_ERRORS.upstreamUnreachable.example('items'),
      API_ERRORS.upstreamInvalidReply.example('items', 200),
      API_ERRORS.upstreamTooLarge.example('items', 1_048_576),
    ),
    503: errorReply(
      'API providers are not available on this server, or a provider header secret cannot be decrypted here',
      API_ERRORS.unavailable.example(),
      API_ERRORS.secretUnreadable.example('items'),
    ),
    504: upstreamErrorReply('The upstream did not answer within the provider timeout', API_ERRORS.upstreamTimeout.example('items', 10_000)),
  };
  const handler = async (request: FastifyRequest) => {
    if (!api) throw API_ERRORS.unavailable();
    return api.send(request.envelope!);
  };
  const common = { tags: ['api'], security: [{ bearer: [] }], response: responses };

  app.post(
    '/api',
    {
      config: { envelope: true, failureLog },
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
    },
    handler,
  );
  app.post(
    '/api/*',
    {
      config: { envelope: true, failureLog },
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
    },
    handler,
  );
};

export default api;
