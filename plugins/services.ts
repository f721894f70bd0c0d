import fp from 'fastify-plugin';
import type { FastifyPluginAsync } from 'fastify';
import type { Server } from '../src/server.js';

/**
 * What the HTTP layer needs from the server object; tests can give a small stand-in. Without `authorize`
 * every protected route answers 403.
 */
export type ServerContext = Pick<Server, 'id' | 'workerId' | 'config' | 'getHealth' | 'metricsText' | 'status' | 'state' | 'request' | 'handle' | 'organizations' | 'onShutdown'> &
  Partial<Pick<Server, 'db' | 'authorize'>>;

declare module 'fastify' {
  interface FastifyInstance {
    fleetplane: ServerContext;
    /** SPEC 7: the server's store (undefined for a stand-in server without one). */
    db: Server['db'] | undefined;
  }
}

/** Decorates the app with the server object so every route and plugin reaches the same services. */
const services: FastifyPluginAsync<{ server: ServerContext }> = async (app, options) => {
  app.decorate('fleetplane', options.server);
  app.decorate('db', options.server.db);
};

export default fp(services, { name: 'fleetplane-services' });
