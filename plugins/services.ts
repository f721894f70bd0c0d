import fp from 'fastify-plugin';
import type { FastifyPluginAsync, FastifyRequest } from 'fastify';
import type { ServerEvents } from '../src/runtime/events.js';
import type { Server } from '../src/server.js';
import type { ServerState } from '../src/state/state.js';
import type { OrganizationDocument } from '../src/db/documents.js';
import { organizationOfRequest } from './organization.js';

/**
 * What routes and plugins use of the server, each with its real type. Every server has the required members;
 * the optional ones are capabilities a server may lack (a test's stand-in, the OpenAPI export), and every route
 * that uses one answers for its absence: without `authorize` every protected route answers 403, without `api`
 * `POST /api` answers 503, without `db` `POST /crud` answers 503...
 */
export interface RouteContext {
  readonly id: Server['id'];
  readonly workerId: Server['workerId'];
  readonly config: Server['config'];
  readonly status: Server['status'];
  getHealth: Server['getHealth'];
  metricsText: Server['metricsText'];
  /** SPEC 5.1 `send` / `request`: what `POST /control` and the WebSocket hand on. */
  send: Server['send'];
  request: Server['request'];
  /** Which organizations this node does not serve right now. */
  readonly state: Pick<ServerState, 'isShed' | 'shedding'> & Partial<Pick<ServerState, 'onShedChange'>>;
  readonly db?: Server['db'];
  readonly authorize?: Server['authorize'];
  readonly organizations?: Server['organizations'];
  readonly storage?: Server['storage'];
  readonly mesh?: Server['mesh'];
  readonly api?: Server['api'];
  readonly workflow?: Server['workflow'];
  readonly webhooks?: Server['webhooks'];
  /** SPEC 13: without it `POST /manager` answers 503. */
  readonly manager?: Server['manager'];
  /** The process's HTTPS certificate, reloaded without a restart; without it HTTPS reads the configured files. */
  readonly https?: Server['https'];
  /** Without a worker runtime there are no HTTP metrics. */
  readonly workerRuntime?: Server['workerRuntime'];
  handle?: Server['handle'];
  /** This process's own status changes (draining, stopping). */
  on?(event: 'status_change', listener: (payload: ServerEvents['status_change']) => void): unknown;
}

declare module 'fastify' {
  interface FastifyInstance {
    fleetplane: RouteContext;
    /** The server's store (undefined for a stand-in server without one). */
    db: RouteContext['db'];
    /** The cluster storage of this process. */
    storage: RouteContext['storage'];
    /** The mesh (in a worker, `send` goes through the primary). */
    mesh: RouteContext['mesh'];
    /** `send` / `request` envelopes. */
    ipc: { send(envelope: unknown): Promise<void>; request(envelope: unknown, timeoutMs?: number): ReturnType<Server['request']> };
    /** The organization that owns the request's host; null for a host no organization serves (or without authorization). */
    organizationOf(request: FastifyRequest): OrganizationDocument | null | Promise<OrganizationDocument | null>;
  }
}

/** Decorates the app with the server object so every route and plugin reaches the same services. */
const services: FastifyPluginAsync<{ server: RouteContext }> = async (app, { server }) => {
  app.decorate('fleetplane', server);
  app.decorate('db', server.db);
  app.decorate('storage', server.storage);
  app.decorate('mesh', server.mesh);
  app.decorate('ipc', {
    send: (envelope: unknown) => server.send(envelope),
    request: (envelope: unknown, timeoutMs?: number) => server.request(envelope, { timeoutMs }),
  });
  app.decorate('organizationOf', (request: FastifyRequest) => organizationOfRequest(server.authorize?.directory, request));
};

export default fp(services, { name: 'fleetplane-services' });
