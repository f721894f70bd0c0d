import fp from 'fastify-plugin';
import type { FastifyPluginAsync } from 'fastify';
import type { Server } from '../src/server.js';

/**
 * What the HTTP layer needs from the server object; tests can give a small stand-in. Without `authorize`
 * every protected route answers 403.
 */
export type ServerContext = Pick<Server, 'id' | 'workerId' | 'config' | 'getHealth' | 'metricsText' | 'status' | 'state' | 'send' | 'request' | 'handle' | 'organizations' | 'onShutdown'> &
  Partial<Pick<Server, 'db' | 'authorize'>>;

declare module 'fastify' {
  interface FastifyInstance {
    fleetplane: ServerContext;
    /** The server's store (undefined for a stand-in server without one). */
    db: Server['db'] | undefined;
    /** The cluster storage of this process. */
    storage: Server['storage'] | undefined;
    /** The mesh (in a worker, `send` goes through the primary). */
    mesh: Server['mesh'] | undefined;
    /** `send` / `request` envelopes. */
    ipc: { send(envelope: unknown): Promise<void>; request(envelope: unknown, timeoutMs?: number): ReturnType<Server['request']> };
  }
}

/** Decorates the app with the server object so every route and plugin reaches the same services. */
const services: FastifyPluginAsync<{ server: ServerContext }> = async (app, options) => {
  app.decorate('fleetplane', options.server);
  app.decorate('db', options.server.db);
  app.decorate('storage', (options.server as Partial<Server>).storage);
  app.decorate('mesh', (options.server as Partial<Server>).mesh);
  app.decorate('ipc', {
    send: (envelope: unknown) => options.server.send(envelope),
    request: (envelope: unknown, timeoutMs?: number) => options.server.request(envelope, { timeoutMs }),
  });
};

export default fp(services, { name: 'fleetplane-services' });
