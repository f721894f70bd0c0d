import fp from 'fastify-plugin';
import { errorBody } from '../src/errors.js';
import { sendError } from './error-reply.js';
import type { FastifyPluginAsync, FastifyReply, FastifySchema, FastifyRequest, RouteOptions, onRequestHookHandler } from 'fastify';

declare module 'fastify' {
  interface FastifyContextConfig {
    /**
     * An envelope route: POST only (other methods 405 with `Allow: POST`), `application/json` only
     * (415), every reply `Cache-Control: no-store`. Body size (413) and JSON and prototype poisoning (400) are
     * the app's body parser settings, shared by every route.
     */
    envelope?: boolean;
  }
}

/** Methods answered 405 on an envelope path; HEAD comes with GET. */
const OTHER_METHODS = ['GET', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'] as const;

export function isJsonContentType(header: string | undefined): boolean {
  if (!header) return false;
  const semicolon = header.indexOf(';');
  return (semicolon < 0 ? header : header.slice(0, semicolon)).trim().toLowerCase() === 'application/json';
}

/** Every answer of an envelope route is `Cache-Control: no-store`: set by the request guard's first hook. */
export function markEnvelopeAnswer(reply: FastifyReply): void {
  reply.header('cache-control', 'no-store');
}

// Callback style: a hook on every request spares itself a promise.
const requireJson: onRequestHookHandler = (request, reply, done) => {
  if (isJsonContentType(request.headers['content-type'])) return done();
  sendError(reply, 415, errorBody('unsupported_media_type', 'content-type must be application/json'));
};

const methodNotAllowed = async (request: FastifyRequest, reply: FastifyReply) =>
  sendError(reply, 405, errorBody('method_not_allowed', `${request.method} is not allowed here; envelopes are POSTed`), { allow: 'POST' });

const asList = <T>(value: T | T[] | undefined): T[] => (value === undefined ? [] : Array.isArray(value) ? value : [value]);

/**
 * The envelope contract for every route declared with `config: { envelope: true }`. Prefix boundaries come from the
 * router: `/api` and `/api/*` are separate routes, so `/apis` matches neither and gets the 404.
 */
const envelope: FastifyPluginAsync = async (app) => {
  const guarded = new Set<string>();
  app.addHook('onRoute', function addEnvelopeBehaviour(route: RouteOptions & { routePath?: string }) {
    if (!route.config?.envelope) return;
    if (route.method !== 'POST') throw new Error(`envelope route ${route.url} must be POST`);
    route.onRequest = [...asList(route.onRequest), requireJson];
    if (guarded.has(route.url)) return;
    guarded.add(route.url);
    // Registered on the instance that declared the route, so it shares that route's hooks and prefix.
    // Answered on request, before the body is read: the method is wrong whatever the body's type or size.
    this.route({ method: [...OTHER_METHODS], url: route.routePath ?? route.url, schema: { hide: true } as FastifySchema, onRequest: methodNotAllowed, handler: methodNotAllowed });
  });
};

export default fp(envelope, { name: 'fleetplane-envelope', dependencies: ['fleetplane-errors'] });
