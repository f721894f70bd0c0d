import fp from 'fastify-plugin';
import type { FastifyPluginAsync } from 'fastify';

/** Methods Fastify adds on its own to every GET route: counted when used, not shown at 0 beforehand. */
const IMPLIED_METHODS = new Set(['HEAD', 'OPTIONS']);

/**
 * Counts every answered request by route pattern (`/workflows/:name`, never the raw URL: the number of series
 * stays bounded), method and status class, and observes its duration. The hook takes a callback so no promise
 * is made per request. A stand-in server without a worker runtime (tests, the OpenAPI export) has no metrics.
 */
const httpMetrics: FastifyPluginAsync = async (app) => {
  const metrics = app.fleetplane.workerRuntime?.httpMetrics;
  if (!metrics) return;
  app.addHook('onRoute', (route) => {
    for (const method of [route.method].flat()) if (!IMPLIED_METHODS.has(method)) metrics.declare(method, route.url);
  });
  app.addHook('onResponse', (request, reply, done) => {
    metrics.record(request.method, request.routeOptions.url, reply.statusCode, reply.elapsedTime / 1000);
    done();
  });
};

export default fp(httpMetrics, { name: 'fleetplane-http-metrics', dependencies: ['fleetplane-services'] });
