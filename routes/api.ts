import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { ErrorReply } from '../schemas/common.js';
import { ApiPathParams, ApiPathRequest, ApiReply, ApiRequest, UpstreamErrorReply } from '../schemas/api.js';
import { ApiError } from '../src/api/errors.js';
import type { Server } from '../src/server.js';

const SEGMENT = /^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$/;
type Status = 400 | 404 | 422 | 502 | 503 | 504;

/** Answers 400 with the error; false, for "the request was refused". */
function refuse(reply: FastifyReply, status: 400, code: string, message: string): false {
  reply.code(status).send({ error: { code, message } });
  return false;
}

/** Before validation: the raw shortcut is named as such, and `/api/<api>/<endpoint>` fills the body's names. */
function prepareEnvelope(request: FastifyRequest, reply: FastifyReply, done: () => void): void {
  // Callback style (no promise per request): a refusal answers and does not call `done`.
  if (checkEnvelope(request, reply)) done();
}

/** False when it refused the request. */
function checkEnvelope(request: FastifyRequest, reply: FastifyReply): boolean {
  const body = request.body;
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return true;
  if (Object.hasOwn(body, 'url')) {
    return refuse(reply, 400, 'url_not_supported', 'url: there is no raw URL shortcut; name an api and an endpoint, requests never leave the provider baseUrl');
  }
  const wildcard = (request.params as { '*'?: string })['*'];
  if (!wildcard) return true;
  const segments = wildcard.split('/');
  if (segments.length > 2 || !segments.every((segment) => SEGMENT.test(segment))) {
    return refuse(reply, 400, 'invalid_path', 'the path must be /api/<api> or /api/<api>/<endpoint>');
  }
  const named = body as Record<string, unknown>;
  for (const [field, value] of [['api', segments[0]], ['endpoint', segments[1]]] as const) {
    if (value === undefined) continue;
    if (named[field] !== undefined && named[field] !== value) return refuse(reply, 400, 'path_mismatch', `${field}: the body says "${String(named[field])}", the path "${value}"`);
    named[field] = value;
  }
  if (named.endpoint === undefined) return refuse(reply, 400, 'invalid_request', 'endpoint: is required');
  return true;
}

/** `POST /api`, `POST /api/*` (SPEC 10): an authorized envelope → the organization's provider → `{ status, data }`. */
const api: FastifyPluginAsyncTypebox = async (app) => {
  const server = app.fleetplane as Partial<Pick<Server, 'api'>>;
  const responses = { 200: ApiReply, 400: ErrorReply, 403: ErrorReply, 404: ErrorReply, 405: ErrorReply, 413: ErrorReply, 415: ErrorReply, 422: ErrorReply, 502: UpstreamErrorReply, 503: ErrorReply, 504: UpstreamErrorReply };
  const handler = async (request: FastifyRequest, reply: FastifyReply) => {
    if (!server.api) return reply.code(503).send({ error: { code: 'unavailable', message: 'API providers are not available on this server' } });
    try {
      return await server.api.send(request.envelope!);
    } catch (error) {
      if (!(error instanceof ApiError)) throw error;
      if (error.statusCode >= 500) request.log.warn({ api: request.envelope!.api, endpoint: request.envelope!.endpoint, code: error.code, upstreamStatus: error.upstreamStatus }, 'api call failed');
      const body = { error: { code: error.code, message: error.message, ...(error.upstreamStatus === undefined ? {} : { upstreamStatus: error.upstreamStatus }) } };
      return reply.code(error.statusCode as Status).send(body);
    }
  };
  const common = { tags: ['api'], security: [{ bearer: [] }], response: responses };

  app.post(
    '/api',
    {
      config: { envelope: true },
      schema: { ...common, summary: "Call an endpoint of one of the organization's API providers", body: ApiRequest },
      preValidation: prepareEnvelope,
      preHandler: app.authorizeEnvelope,
    },
    handler,
  );
  app.post(
    '/api/*',
    {
      config: { envelope: true },
      schema: { ...common, summary: 'Call a provider endpoint named by the path: /api/<api>/<endpoint>', params: ApiPathParams, body: ApiPathRequest },
      preValidation: prepareEnvelope,
      preHandler: app.authorizeEnvelope,
    },
    handler,
  );
};

export default api;
