import type { TLSSocket } from 'node:tls';
import fp from 'fastify-plugin';
import type { FastifyPluginAsync, FastifyRequest, preHandlerAsyncHookHandler, preHandlerHookHandler } from 'fastify';
import type { AuthorizationRequest, Authorizer } from '../src/auth/authorize.js';
import type { AuthorizedEnvelope } from '../src/auth/envelope.js';
import { AUTH_ERRORS, AuthorizationError } from '../src/auth/errors.js';
import { StoreError } from '../src/db/errors.js';

export type EnvelopeAuthorizer = Pick<Authorizer, 'request'> & Partial<Pick<Authorizer, 'cached'>>;

declare module 'fastify' {
  interface FastifyInstance {
    /** The server's authorizer (`server.authorize`). */
    authorize: EnvelopeAuthorizer;
    /** preHandler for envelope routes: authorizes the JSON body and exposes it as `request.envelope`. */
    authorizeEnvelope: preHandlerHookHandler;
    /** preHandler for routes without an envelope body (`GET /metrics`): authorizes `{ method }` with the request's key. */
    requirePermission(method: string): preHandlerAsyncHookHandler;
  }
  interface FastifyRequest {
    /** The authorized envelope (deeply frozen), or null before or without authorization. */
    readonly envelope: AuthorizedEnvelope | null;
  }
}

export interface AuthorizePluginOptions {
  /** Default: the server object's `authorize`. */
  authorizer?: EnvelopeAuthorizer;
}

/** Without an authorization service nothing is authorized: every protected route answers 403. */
const unavailable: EnvelopeAuthorizer = {
  request: () => Promise.reject(AUTH_ERRORS.authorizationUnavailable()),
};

/**
 * The host that chooses the tenant: the request's own `Host` header. Never `request.host`: with `trustProxy`
 * set, Fastify reads `X-Forwarded-Host` there, and a client behind a trusted proxy could name another tenant.
 */
export function tenantHost(request: FastifyRequest): string | undefined {
  return request.headers.host;
}

export function authorizationRequest(request: FastifyRequest): AuthorizationRequest {
  // The connection itself: it has the fields authorization reads (a TLS socket's `encrypted` is true).
  return { host: tenantHost(request), headers: request.headers, socket: request.socket as TLSSocket };
}

/**
 * Decorates the app with `authorize` and the preHandlers routes share. The authorized envelope is kept outside
 * the request object and exposed through a getter, so a handler can neither change it nor swap it.
 */
const authorize: FastifyPluginAsync<AuthorizePluginOptions> = async (app, options) => {
  const authorizer = options.authorizer ?? app.fleetplane?.authorize ?? unavailable;
  const authorized = new WeakMap<FastifyRequest, AuthorizedEnvelope>();

  const accept = (request: FastifyRequest, result: AuthorizedEnvelope): void => {
    authorized.set(request, result);
    // The organization map learns which workers serve which organization from here.
    app.fleetplane?.organizations?.touch(result.organization_id);
  };
  const run = async (request: FastifyRequest, envelope: unknown): Promise<void> => {
    try {
      accept(request, await authorizer.request(authorizationRequest(request), envelope));
    } catch (error) {
      // A store that cannot be reached, or refuses this server, is no verdict on the caller: 503 store_unavailable
      // or 500 store_misconfigured (plugins/errors.ts).
      if (error instanceof StoreError && error.statusCode >= 500) throw error;
      const refusal =
        error instanceof AuthorizationError
          ? error
          : AUTH_ERRORS.authorizationFailed();
      if (!(error instanceof AuthorizationError)) request.log.error({ err: error }, 'authorization failed');
      // The error handler answers it, with `Retry-After` past the failed-authentication limit.
      throw refusal;
    }
  };

  app.decorate('authorize', authorizer);
  app.decorateRequest('envelope', {
    getter(this: FastifyRequest) {
      return authorized.get(this) ?? null;
    },
  });
  // Callback style: a request whose host, key and platform organization are cached is authorized without a
  // promise; every other one (refusals included) takes the full path.
  app.decorate('authorizeEnvelope', function authorizeEnvelope(request: FastifyRequest, _reply: unknown, done: (error?: Error) => void) {
    const result = authorizer.cached?.(authorizationRequest(request), request.body);
    if (result) {
      accept(request, result);
      return done();
    }
    run(request, request.body).then(() => done(), done);
  } as preHandlerHookHandler);
  app.decorate('requirePermission', (method: string): preHandlerAsyncHookHandler => async (request) => run(request, { method }));
};

export default fp(authorize, { name: 'fleetplane-authorize', dependencies: ['fleetplane-services'] });
