import fp from 'fastify-plugin';
import type { FastifyPluginAsync } from 'fastify';
import type { Server } from '../src/server.js';

/** What the HTTP layer needs from the server object; tests can give a small stand-in. */
export type ServerContext = Pick<Server, 'id' | 'workerId' | 'config' | 'getHealth' | 'metricsText' | 'status' | 'state'>;

declare module 'fastify' {
  interface FastifyInstance {
    fleetplane: ServerContext;
  }
}

/** Decorates the app with the server object so every route and plugin reaches the same services. */
const services: FastifyPluginAsync<{ server: ServerContext }> = async (app, options) => {
  app.decorate('fleetplane', options.server);
};

export default fp(services, { name: 'fleetplane-services' });
