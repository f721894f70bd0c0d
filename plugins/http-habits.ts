import fp from 'fastify-plugin';
import compress from '@fastify/compress';
import type { FastifyPluginAsync, FastifyReply, FastifyRequest, FastifySchema, onSendHookHandler } from 'fastify';
import type { ResolvedConfig } from '../src/config/schema.js';
import type { OrganizationDocument } from '../src/db/documents.js';
import { StoreCache } from '../src/db/store-cache.js';
import { organizationOfRequest } from './organization.js';
import type { RouteContext } from './services.js';
import { errorBody } from '../src/errors.js';
import { sendError } from './error-reply.js';

export interface HttpHabitsOptions {
  http: ResolvedConfig['http'];
  /** Where organizations' own allow-lists are read (its store and directory); without one only the global list applies. */
  server?: Pick<RouteContext, 'db' | 'authorize'>;
}

const isPreflight = (headers: Record<string, unknown>) => headers.origin !== undefined && headers['access-control-request-method'] !== undefined;

const refuse = (reply: FastifyReply) => sendError(reply, 403, errorBody('origin_not_allowed', 'this origin may not call this server from a browser'));

const ALLOWED_METHODS = ['GET', 'HEAD', 'POST'];
const EXPOSED_HEADERS = ['x-request-id', 'retry-after'];

/** Adds `field` to the reply's `Vary` unless it is there already or the reply varies on everything (`*`). */
function addVary(reply: FastifyReply, field: string): void {
  const current = reply.getHeader('vary');
  if (!current) {
    reply.header('vary', field);
    return;
  }
  const text = Array.isArray(current) ? current.join(', ') : String(current);
  const names = text.toLowerCase().split(',').map((name) => name.trim());
  if (names.includes('*') || names.includes(field.toLowerCase())) return;
  reply.header('vary', `${text}, ${field}`);
}

const listsOrigins = (organization: Pick<OrganizationDocument, 'cors'> | null | undefined) => (organization?.cors?.origins.length ?? 0) > 0;

/**
 * What browsers and proxies expect of an HTTP service. CORS: an origin is allowed when it is on the global
 * `http.cors.origins` or on the `cors.origins` of the organization that owns the request's host (never another
 * organization's); off while neither lists any. A preflight from an allowed origin gets 204 with the CORS
 * headers; any other origin gets no `Access-Control-Allow-Origin`, and its preflight a 403.
 * CORS only tells a browser what it may show a page: every request is still authorized by its key as usual.
 * Compression (`http.compression`): JSON and text replies from `thresholdBytes` on, br or gzip as the client
 * accepts; smaller replies (most envelope answers) pass untouched. Request bodies are never decompressed: the
 * body limit applies to what is on the wire and what is parsed alike.
 */
const httpHabits: FastifyPluginAsync<HttpHabitsOptions> = async (app, { http, server }) => {
  const directory = server?.authorize?.directory;
  const store = server?.db;
  const global = new Set(http.cors.origins);
  if (global.size > 0 || directory) {
    const exposed = EXPOSED_HEADERS.join(', ');
    const methods = ALLOWED_METHODS.join(', ');
    const maxAge = String(http.cors.maxAgeS);
    /** The CORS answer for an allowed origin; true when it answered the request (a preflight). */
    const allowOrigin = (request: FastifyRequest, reply: FastifyReply, origin: string): boolean => {
      reply.header('access-control-allow-origin', origin).header('access-control-expose-headers', exposed);
      // An OPTIONS from an allowed origin without Access-Control-Request-Method gets the 204 too, not a 400.
      if (request.method !== 'OPTIONS') return false;
      reply.header('access-control-allow-methods', methods);
      addVary(reply, 'Access-Control-Request-Headers');
      const requested = request.headers['access-control-request-headers'];
      if (requested !== undefined) reply.header('access-control-allow-headers', requested);
      reply.header('access-control-max-age', maxAge);
      // Browsers wait for a body on a 204 without Content-Length.
      reply.code(204).header('content-length', '0').send();
      return true;
    };

    /** Whether some organization lists origins: asked only for preflights CORS did not allow, cached like the directory. */
    const anyListing = directory && store ? new StoreCache(store, ['organizations']) : undefined;
    if (anyListing) app.addHook('onClose', async () => anyListing.close());
    const corsIsOn = async (request: FastifyRequest): Promise<boolean> => {
      if (global.size > 0 || !directory || !anyListing) return global.size > 0;
      if (listsOrigins(await organizationOfRequest(directory, request))) return true;
      return anyListing.get('any', async () => {
        const listed = await store!.collection<OrganizationDocument>('organizations').find({ cors: { $exists: true } }, { projection: { cors: 1 } });
        return listed.some(listsOrigins);
      });
    };
    /**
     * What reaches here is a request from an origin not allowed on this host. Its preflight is refused: without
     * this the envelope routes would answer it 405, which says the wrong thing. While no list names any origin,
     * CORS is off and the routes answer as they would without it.
     */
    const notAllowed = (request: FastifyRequest, reply: FastifyReply): undefined | Promise<boolean> => {
      if (request.method !== 'OPTIONS' || !isPreflight(request.headers)) return undefined;
      return corsIsOn(request).then((on) => {
        if (on) refuse(reply);
        return on;
      });
    };

    // A step of the request guard's hook: requests without an Origin (nearly all but browsers' cross-origin
    // ones) and globally listed origins are decided without a promise; others look up their host's
    // organization, from the cache when it answers without waiting. Every answer varies with Origin, whatever
    // the decision.
    app.addRequestStep((request, reply) => {
      addVary(reply, 'Origin');
      const origin = request.headers.origin;
      if (origin === undefined) return undefined;
      if (global.has(origin)) return allowOrigin(request, reply, origin) || undefined;
      if (!directory) return notAllowed(request, reply);
      const decide = (organization: OrganizationDocument | null) => {
        if (!organization?.cors?.origins.includes(origin)) return notAllowed(request, reply);
        return allowOrigin(request, reply, origin) || undefined;
      };
      const found = organizationOfRequest(directory, request);
      if (!(found instanceof Promise)) return decide(found);
      return found.then(async (organization) => (await decide(organization)) === true);
    });
    // Preflights of allowed origins are answered by the hook; any other OPTIONS on a path without its own
    // OPTIONS route is a 404, as it would be without CORS.
    app.options('*', { schema: { hide: true } as FastifySchema }, (_request, reply) => reply.callNotFound());
  }
  if (http.compression.enabled) {
    const threshold = http.compression.thresholdBytes;
    await app.register(compress, { threshold, encodings: ['br', 'gzip'], globalDecompression: false });
    // Registered after the compression plugin, so its onRoute hook has added its onSend to the route already.
    app.addHook('onRoute', (route) => skipSmallReplies(route, threshold));
  }
};

/**
 * A text reply under the threshold leaves the compression hook as it came, whatever the request: the hook only
 * takes longer to say so (about 3 µs of a 300-byte envelope answer, reading four headers). Each route's
 * compression hook is put behind that check, the one that decides nothing is compressed; anything else (large
 * replies, buffers, streams) reaches the hook as before.
 */
export function skipSmallReplies(route: { onSend?: unknown }, threshold: number): void {
  const hooks = route.onSend;
  if (!Array.isArray(hooks)) return;
  const index = hooks.findLastIndex((hook: { name?: string }) => hook.name === 'onSend');
  if (index < 0) return;
  const compressHook = hooks[index] as onSendHookHandler;
  const gated: onSendHookHandler = function compressLargeReplies(request, reply, payload, done) {
    if (typeof payload === 'string' && Buffer.byteLength(payload) < threshold) return done(null, payload);
    return (compressHook as (...args: unknown[]) => void).call(this, request, reply, payload, done);
  };
  hooks[index] = gated;
}

export default fp(httpHabits, { name: 'fleetplane-http-habits', dependencies: ['fleetplane-request-guard'] });
