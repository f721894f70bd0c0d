import fp from 'fastify-plugin';
import cors from '@fastify/cors';
import compress from '@fastify/compress';
import type { FastifyPluginAsync, onRequestHookHandler } from 'fastify';
import type { ResolvedConfig } from '../src/config/schema.js';

export interface HttpHabitsOptions {
  http: ResolvedConfig['http'];
}

const isPreflight = (headers: Record<string, unknown>) => headers.origin !== undefined && headers['access-control-request-method'] !== undefined;

/**
 * Runs after the CORS hook, which answers the preflights it allows: what reaches here is a preflight from an
 * origin not on the list. Without this the envelope routes would answer it 405, which says the wrong thing.
 */
const refuseOtherPreflights: onRequestHookHandler = (request, reply, done) => {
  if (request.method !== 'OPTIONS' || !isPreflight(request.headers)) return done();
  reply
    .code(403)
    .header('cache-control', 'no-store')
    .send({ error: { code: 'origin_not_allowed', message: 'this origin may not call this server from a browser' } });
};

/**
 * What browsers and proxies expect of an HTTP service. CORS (`http.cors.origins`, off while empty): a preflight
 * from a listed origin gets 204 with the CORS headers; any other origin gets no `Access-Control-Allow-Origin`.
 * CORS only tells a browser what it may show a page: every request is still authorized by its key as usual.
 * Compression (`http.compression`): JSON and text replies from `thresholdBytes` on, br or gzip as the client
 * accepts; smaller replies (most envelope answers) pass untouched. Request bodies are never decompressed: the
 * body limit applies to what is on the wire and what is parsed alike.
 */
const httpHabits: FastifyPluginAsync<HttpHabitsOptions> = async (app, { http }) => {
  if (http.cors.origins.length > 0) {
    const allowed = new Set(http.cors.origins);
    await app.register(cors, {
      origin: (origin, callback) => callback(null, origin !== undefined && allowed.has(origin)),
      methods: ['GET', 'HEAD', 'POST'],
      maxAge: http.cors.maxAgeS,
      exposedHeaders: ['x-request-id', 'retry-after'],
      // An OPTIONS from a listed origin without Access-Control-Request-Method gets the 204 too, not a text/plain 400.
      strictPreflight: false,
    });
    app.addHook('onRequest', refuseOtherPreflights);
  }
  if (http.compression.enabled) {
    await app.register(compress, { threshold: http.compression.thresholdBytes, encodings: ['br', 'gzip'], globalDecompression: false });
  }
};

export default fp(httpHabits, { name: 'fleetplane-http-habits' });
