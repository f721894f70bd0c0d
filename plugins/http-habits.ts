import fp from 'fastify-plugin';
import cors from '@fastify/cors';
import compress from '@fastify/compress';
import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
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
    const base = {
      methods: ['GET', 'HEAD', 'POST'],
      maxAge: http.cors.maxAgeS,
      exposedHeaders: ['x-request-id', 'retry-after'],
      // An OPTIONS from an allowed origin without Access-Control-Request-Method gets the 204 too, not a text/plain 400.
      strictPreflight: false,
    };
    const allow = { ...base, origin: true };
    const deny = { ...base, origin: false };
    // Requests without an Origin (nearly all but browsers' cross-origin ones) and globally listed origins are
    // answered at once; others look up their host's organization, from the cache when it answers without waiting.
    const delegator = (request: FastifyRequest, callback: (error: Error | null, options: typeof allow | typeof deny) => void) => {
      const origin = request.headers.origin;
      if (origin === undefined) return callback(null, deny);
      if (global.has(origin)) return callback(null, allow);
      if (!directory) return callback(null, deny);
      const found = organizationOfRequest(directory, request);
      const decide = (organization: OrganizationDocument | null) => callback(null, organization?.cors?.origins.includes(origin) ? allow : deny);
      if (!(found instanceof Promise)) return decide(found);
      found.then(decide, (error: Error) => callback(error, deny));
    };
    await app.register(cors, { delegator });

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
     * Runs after the CORS hook, which answers the preflights it allows: what reaches here is a preflight from an
     * origin not allowed on this host. Without this the envelope routes would answer it 405, which says the wrong
     * thing. While no list names any origin, CORS is off and the routes answer as they would without it.
     */
    app.addHook('onRequest', (request, reply, done) => {
      if (request.method !== 'OPTIONS' || !isPreflight(request.headers)) return done();
      corsIsOn(request).then((on) => {
        if (on) refuse(reply);
        else done();
      }, done);
    });
  }
  if (http.compression.enabled) {
    await app.register(compress, { threshold: http.compression.thresholdBytes, encodings: ['br', 'gzip'], globalDecompression: false });
  }
};

export default fp(httpHabits, { name: 'fleetplane-http-habits' });
