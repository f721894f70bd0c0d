import fp from 'fastify-plugin';
import type { FastifyPluginAsync } from 'fastify';
import { normalizeHost } from '../src/auth/host.js';
import type { Server } from '../src/server.js';

/**
 * SPEC 3.4: requests of a shed organization get the fallback — a 307 to the fallback target with
 * `Connection: close`, or 503 with `Retry-After` when there is none — so the load balancer sends them to
 * another node. Costs nothing while nothing is shed.
 */
const shed: FastifyPluginAsync = async (app) => {
  const server = app.fleetplane as unknown as Server;
  const { fallback } = server.config;
  app.addHook('onRequest', async (request, reply) => {
    if (!server.state?.shed?.size) return;
    const host = normalizeHost(request.host);
    const organization = host ? await server.authorize?.directory.organizationForHost(host) : null;
    if (!organization || !server.state.isShed(organization._id)) return;
    reply.raw.shouldKeepAlive = false;
    reply.header('cache-control', 'no-store').header('connection', 'close');
    if (fallback.redirect) {
      return reply.code(307).header('location', fallback.redirect.replace(/\/+$/, '') + request.url).send();
    }
    return reply
      .code(503)
      .header('retry-after', String(fallback.retryAfterS))
      .send({ error: { code: 'unavailable', message: 'this organization is not served on this node right now; retry later' } });
  });
};

export default fp(shed, { name: 'fleetplane-shed', dependencies: ['fleetplane-services'] });
