import fp from 'fastify-plugin';
import type { FastifyBaseLogger, FastifyError, FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import type { WebSocket } from 'ws';
import { duplicatedHeader } from '../src/http/duplicate-headers.js';
import { unsupportedTransferEncoding } from '../src/http/transfer-encoding.js';
import { StoreError } from '../src/db/errors.js';
import { RateLimitedWarnings } from '../src/logging/rate-limited.js';
import { FleetplaneError, errorBody } from '../src/errors.js';
import { declaredFieldLike, misspelledAs, schemaAt, unknownField } from '../src/schema/field-hint.js';
import { sendError } from './error-reply.js';
import { closeUpgradeOnAnswer, refuseDuplicateHeader, refuseTransferEncoding } from './request-guard.js';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** How this route's failed envelopes are logged: the error handler logs them all by one policy (see `logFailure`). */
    failureLog?: FailureLog;
  }
}

/** What a route tells the error handler about its failed envelopes. */
export interface FailureLog {
  /** The line's message (`workflow failed`), unless the error has its own. */
  message: string;
  /** What the line names of the request: the workflow, the provider and endpoint, the method. */
  context(request: FastifyRequest): Record<string, unknown>;
}

/**
 * One policy for the failed envelopes of every route: an answered domain error that asks for a line (an exposed
 * 5xx at warn, a refusal worth noting at its level; see `FleetplaneError.logLine`) is logged with what its route
 * names of the request, then the error's own fields (its code, the step, the upstream's status).
 */
function logFailure(request: FastifyRequest, error: FleetplaneError): void {
  const failureLog = request.routeOptions.config.failureLog;
  const line = failureLog && error.logLine;
  if (line) request.log[line.level]({ ...failureLog.context(request), ...line.fields }, line.message ?? failureLog.message);
}

/** Fastify's own error codes mapped to stable, documented ones. */
const CODES: Record<number, string> = {
  400: 'bad_request',
  401: 'unauthorized',
  403: 'forbidden',
  404: 'not_found',
  405: 'method_not_allowed',
  413: 'payload_too_large',
  414: 'uri_too_long',
  415: 'unsupported_media_type',
  429: 'too_many_requests',
  503: 'unavailable',
};

/**
 * The first schema violation, naming the field: `worker: must be integer`, `wroker: unknown field`. With the
 * request, an unknown field names the declared one it is close to (`colection: unknown field (did you mean
 * "collection"?)`), also when the violation reported first is the required field it misspells.
 */
export function validationMessage(error: FastifyError, request?: FastifyRequest): string {
  const [first] = error.validation!;
  const params = (first!.params ?? {}) as { additionalProperty?: string; missingProperty?: string };
  const at = (first!.instancePath ?? '').replace(/^\//, '').split('/').filter(Boolean);
  let field = at.join('.');
  let message = first!.message ?? 'is invalid';
  const context = error.validationContext;
  const schema = request && context ? schemaAt((request.routeOptions.schema as Record<string, unknown> | undefined)?.[context], at) : undefined;
  const name = (key: string) => (field ? `${field}.${key}` : key);
  if (first!.keyword === 'additionalProperties' && params.additionalProperty) {
    field = name(params.additionalProperty);
    message = unknownField(declaredFieldLike(schema, params.additionalProperty));
  } else if (first!.keyword === 'required' && params.missingProperty) {
    const value = request && context ? at.reduce<unknown>((parent, key) => (parent as Record<string, unknown> | undefined)?.[key], (request as unknown as Record<string, unknown>)[context === 'querystring' ? 'query' : context]) : undefined;
    const misspelled = misspelledAs(schema, value, params.missingProperty);
    field = name(misspelled ?? params.missingProperty);
    message = misspelled ? unknownField(params.missingProperty) : 'is required';
  }
  return `${field || context || 'request'}: ${message}`;
}

/**
 * One error shape for every route: `{ error: { code, message } }` with the status code kept. Routes and hooks
 * throw; a domain error (`FleetplaneError`) whose message may be shown answers with its own code, details and
 * headers. Otherwise only 4xx answers expose their message; a 5xx says nothing about internals and is logged
 * in full instead.
 */
const errors: FastifyPluginAsync = async (app) => {
  // A store that stays away, full, locked or refusing this server fails every request that needs it: the reason is
  // logged a bounded number of times a minute, counted per kind (unavailable, busy, full, misconfigured) so a new
  // kind of failure is always seen. A refusal (credentials, rights) is the same until an operator acts: one line.
  const storeWarnings = new Map<string, RateLimitedWarnings>();
  const warnStore = (log: FastifyBaseLogger, error: StoreError) => {
    let warnings = storeWarnings.get(error.code);
    const max = error.statusCode === 503 ? 10 : 1;
    if (!warnings) storeWarnings.set(error.code, (warnings = new RateLimitedWarnings({ max, windowMs: 60_000, what: `${error.code} answers`, log: app.log })));
    warnings.warn(log, { err: error }, error.statusCode === 503 ? 'the data store is unavailable' : 'the data store refused this server');
  };
  app.setErrorHandler((error: FastifyError | FleetplaneError, request, reply) => {
    if (error instanceof FleetplaneError && error.expose) {
      logFailure(request, error);
      // The caller hears that the store is unavailable, and when to retry; the operator reads why.
      if (error.statusCode === 503 && error.cause instanceof StoreError) {
        warnStore(request.log, error.cause);
        return sendError(reply, 503, error.toBody(), error.headers ?? error.cause.headers);
      }
      return sendError(reply, error.statusCode, error.toBody(), error.headers);
    }
    const status = error.statusCode && error.statusCode >= 400 && error.statusCode < 600 ? error.statusCode : 500;
    const storeAnswer = error instanceof StoreError && status >= 500 ? error.failureAnswer : undefined;
    if (storeAnswer) {
      warnStore(request.log, error as StoreError);
      return sendError(reply, status, { error: storeAnswer }, (error as StoreError).headers);
    }
    if (status >= 500 || error instanceof FleetplaneError) {
      request.log.error({ err: error }, 'request failed');
      return sendError(reply, status, errorBody(status === 503 ? 'unavailable' : 'internal', 'internal error'));
    }
    if (error.validation?.length) return sendError(reply, 400, errorBody('invalid_request', validationMessage(error, request)));
    return sendError(reply, status, errorBody(CODES[status] ?? 'bad_request', error.message));
  });
  app.setNotFoundHandler((request, reply) => {
    sendError(reply, 404, errorBody('not_found', `no route for ${request.method} ${request.url.split('?')[0]}`));
  });
};

/**
 * Fastify's `frameworkErrors`: what the router refuses before any hook runs — a path that is not valid
 * percent-encoding (400) or a path parameter longer than `maxParamLength` (414) — in the one error shape.
 * Fastify's own answers echo the path and lack `Cache-Control`.
 */
export function frameworkErrors(error: FastifyError, request: FastifyRequest, reply: FastifyReply): void {
  // The request guard is an onRequest hook, which these requests never reach.
  closeUpgradeOnAnswer(request, reply);
  const duplicated = duplicatedHeader(request.raw.rawHeaders);
  if (duplicated) return refuseDuplicateHeader(duplicated, reply);
  const transfer = unsupportedTransferEncoding(request.headers['transfer-encoding']);
  if (transfer !== undefined) return refuseTransferEncoding(transfer, reply);
  let status = 400;
  let message = 'the URL is not valid percent-encoding';
  if (error.code === 'FST_ERR_MAX_PARAM_LENGTH') {
    status = 414;
    message = 'a path segment is longer than this server accepts';
  } else if (error.code !== 'FST_ERR_BAD_URL') {
    request.log.error({ err: error }, 'routing failed');
    sendError(reply, 500, errorBody('internal', 'internal error'));
    return;
  }
  sendError(reply, status, errorBody(CODES[status]!, message));
}

/** Protocol errors are what a client sent wrong (`ws`'s `WS_ERR_*` codes): a bad opcode, an oversized or unmasked frame, invalid UTF-8. */
const isProtocolError = (error: Error & { code?: unknown }) => typeof error.code === 'string' && error.code.startsWith('WS_ERR_');

/**
 * The WebSocket plugin's `errorHandler`. A client's protocol error is the client's doing and anyone can cause
 * it before authenticating: a warning without a stack, a bounded number per minute. Anything else is ours and
 * is logged in full. Either way the socket is dropped, as the plugin's own handler does.
 */
export function websocketErrorHandler(log: FastifyBaseLogger, limits = { max: 10, windowMs: 60_000 }) {
  const protocolErrors = new RateLimitedWarnings({ ...limits, what: 'websocket protocol errors', log });
  return (error: Error & { code?: unknown }, socket: WebSocket, request: FastifyRequest): void => {
    if (isProtocolError(error)) protocolErrors.warn(request.log, { code: error.code, reason: error.message }, 'websocket protocol error');
    else request.log.error({ err: error }, 'websocket handler failed');
    socket.terminate();
  };
}

export default fp(errors, { name: 'fleetplane-errors' });
