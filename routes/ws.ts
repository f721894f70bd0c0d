import type { FastifyPluginAsync, FastifyRequest, FastifySchema } from 'fastify';
import websocket from '@fastify/websocket';
import type { WebSocket } from 'ws';
import { AuthorizationError } from '../src/auth/errors.js';
import { FleetplaneError, errorAnswer, type ErrorAnswer } from '../src/errors.js';
import { DATA_ALIASES, IpcError, withDataAlias } from '../src/ipc/envelope.js';
import { StoreError } from '../src/db/errors.js';
import { authorizationRequest } from '../plugins/authorize.js';
import { websocketErrorHandler } from '../plugins/errors.js';
import { ENVELOPE_ERRORS, errorReply } from '../schemas/errors.js';
import { controlEnvelope } from './control.js';
import { isCrudMethod } from '../src/crud/envelope.js';
import { runCrud } from '../src/crud/run.js';
import { API_ERRORS } from '../src/api/errors.js';
import { HTTP_METHODS } from '../src/api/provider.js';
import { WORKFLOW_ERRORS, workflowsUnavailable } from '../src/workflows/errors.js';
import { RESERVED_WORKFLOW_NAMES } from '../src/workflows/definition.js';
import { refused } from '../src/auth/refusals.js';
import type { AuthorizedEnvelope } from '../src/auth/envelope.js';
import { OVERVIEW_EMIT, OVERVIEW_EVENT, OVERVIEW_SUBSCRIBE, OverviewSubscribers } from '../src/overview/subscribers.js';

const MAX_FRAME_BYTES = 1024 * 1024;
/** Malformed frames tolerated per socket before it is closed with 1008 (policy violation). */
export const MAX_BAD_FRAMES = 5;
const API_METHODS: ReadonlySet<string> = new Set(HTTP_METHODS);
const WORKFLOW_METHOD = /^workflow\.([A-Za-z0-9][A-Za-z0-9_-]{0,63})$/;

/**
 * The errors a frame may be answered with, by their code and message (never the HTTP answer's extra fields);
 * anything else is internal. An IPC error is answered whatever its status, as a reply in the envelope's target
 * list would carry it.
 */
function answerOf(error: unknown): ErrorAnswer | undefined {
  if (error instanceof IpcError || (error instanceof FleetplaneError && error.expose)) return errorAnswer(error.code, error.message);
  // The store away or refusing this server: said as on HTTP, without its internals.
  return error instanceof StoreError ? error.failureAnswer : undefined;
}

type Frame = { id?: string | number | null; ok: boolean; result?: unknown; error?: ErrorAnswer } | { event: string; data: unknown };

/**
 * `GET /ws`: a WebSocket per browser or service, a full envelope transport. Each incoming frame is an envelope,
 * authorized like an HTTP one (the key from the upgrade's `Authorization` header or the envelope's `apikey`),
 * and served as its HTTP route serves it: `object.*` as `/crud`, `workflow.<name>` as `/workflows/<name>`,
 * HTTP verbs with `api` as `/api`, anything else as `/control`. Answers carry the caller's `requestId`.
 * Targeted events (`socket.emit` envelopes) go out to the organization's subscribed sockets.
 */
const ws: FastifyPluginAsync = async (app) => {
  const server = app.fleetplane;
  const byOrganization = new Map<string, Set<WebSocket>>();
  /** The sockets that receive their organization's events, admitted by `socket.subscribe`. */
  const subscribers = new Map<string, Set<WebSocket>>();
  const subscribe = (organizationId: string, socket: WebSocket) => {
    const sockets = subscribers.get(organizationId) ?? new Set<WebSocket>();
    subscribers.set(organizationId, sockets.add(socket));
  };
  const unsubscribe = (organizationId: string, socket: WebSocket) => {
    const sockets = subscribers.get(organizationId);
    if (sockets?.delete(socket) && sockets.size === 0) subscribers.delete(organizationId);
  };
  await app.register(websocket, { errorHandler: websocketErrorHandler(app.log), options: { maxPayload: MAX_FRAME_BYTES, perMessageDeflate: false } });

  const send = (socket: WebSocket, frame: Frame) => {
    if (socket.readyState === socket.OPEN) socket.send(JSON.stringify(frame));
  };
  const closeAll = (code: number, reason: string, organizations?: ReadonlySet<string>) => {
    for (const [organizationId, sockets] of byOrganization) {
      if (organizations && !organizations.has(organizationId)) continue;
      for (const socket of sockets) socket.close(code, reason);
    }
  };

  server.state.onShedChange?.((shed) => closeAll(1013, 'organization shed: try again later', shed));
  // Draining or stopping: WebSockets are told to go elsewhere before the worker waits for its connections.
  // A hand-over's workers close with 1012 (service restart): clients reconnect at once, to the new primary.
  server.on?.('status_change', ({ worker, newStatus, reason }) => {
    if (worker !== server.workerId || (newStatus !== 'draining' && newStatus !== 'stopping')) return;
    if (reason === 'handover') closeAll(1012, 'server restarting: reconnect');
    else closeAll(1001, 'server going away');
  });
  server.handle?.('socket.emit', (data, envelope) => {
    const organizationId = envelope.organization_id;
    const { event, payload } = (data ?? {}) as { event?: unknown; payload?: unknown };
    if (!organizationId || typeof event !== 'string' || event.length === 0 || event.length > 128) {
      throw new IpcError('bad_request', 'socket.emit needs organization_id and data: { event: string, payload }', 'data');
    }
    const sockets = subscribers.get(organizationId) ?? new Set();
    for (const socket of sockets) send(socket, { event, data: payload ?? null });
    return { delivered: sockets.size };
  });
  /** Platform sockets that asked for the fleet's events (`overview.subscribe`, a server-level method). */
  const overviewSubscribers = new OverviewSubscribers();
  server.handle?.(OVERVIEW_EMIT, (data) => overviewSubscribers.deliver(data));

  /** What the upgrade's own key was authorized for (`socket.subscribe`), when it was. */
  const upgradeGrants = new WeakMap<FastifyRequest, AuthorizedEnvelope>();
  /**
   * Before the upgrade: a host that serves no organization, or an `Authorization` header whose key is malformed,
   * unknown, revoked or not this organization's, is refused with the HTTP answer an envelope route gives; a
   * valid key without `socket.subscribe` connects without events.
   */
  const checkUpgrade = async (request: FastifyRequest) => {
    if (request.headers.authorization === undefined) {
      const organization = await app.organizationOf(request);
      // A refusal is answered by the error handler, as an envelope route's is.
      if (!organization) throw refused();
      if (!organization.defaultPermissions) return;
    }
    // A key is checked by the authorizer whatever the host, so that a key on an unknown host is counted, limited
    // and held like any other failed authentication (SPEC 8.7) instead of answering at once.
    try {
      upgradeGrants.set(request, await app.authorize.request(authorizationRequest(request), { method: 'socket.subscribe' }));
    } catch (error) {
      if (error instanceof AuthorizationError && (error.code === 'permission_denied' || (error.code === 'forbidden' && request.headers.authorization === undefined))) return;
      throw error;
    }
  };

  /** Serves one authorized envelope as its HTTP route would. */
  const dispatch = async (authorized: AuthorizedEnvelope, requestedScope: boolean, log: FastifyRequest['log']): Promise<unknown> => {
    const { method } = authorized;
    if (isCrudMethod(method)) return runCrud(server.db, authorized, { maxCollections: server.config.db?.maxCollectionsPerOrganization });
    const workflow = WORKFLOW_METHOD.exec(method);
    if (workflow) {
      const name = workflow[1]!;
      if (RESERVED_WORKFLOW_NAMES.has(name)) throw WORKFLOW_ERRORS.invalidRequest(`name: "${name}" is reserved`);
      const inputs = authorized[name];
      if (!Array.isArray(inputs)) throw WORKFLOW_ERRORS.invalidRequest(`${name}: is required, a list of inputs`);
      if (!server.workflow) throw workflowsUnavailable();
      return { [name]: await server.workflow.runEach(name, inputs, { organization_id: authorized.organization_id }) };
    }
    if (API_METHODS.has(method) && authorized.api !== undefined) {
      if (!server.api) throw API_ERRORS.unavailable();
      return server.api.send(authorized);
    }
    const routed = controlEnvelope(authorized, requestedScope);
    log.info({ key_id: authorized.user?.key_id ?? null, organization: authorized.organization_id, method: routed.method, target: { ...routed, data: undefined } }, 'control request');
    return server.request(routed);
  };

  app.get(
    '/ws',
    {
      onRequest: checkUpgrade,
      websocket: true,
      schema: {
        tags: ['control'],
        operationId: 'openWebSocket',
        summary: 'WebSocket: authorized envelopes in, replies and targeted events out',
        description:
          'Each frame is a JSON envelope, authorized like an HTTP one (the key from the upgrade\'s `Authorization` header or the ' +
          "envelope's `apikey`) and served as its HTTP route serves it: `object.*` as `/crud`, `workflow.<name>` as `/workflows/<name>`, " +
          'HTTP verbs with `api` as `/api`, anything else as `/control`. Answers are `{ id, ok, result | error }` with the frame\'s ' +
          '`requestId`; events are `{ event, data }`, sent to sockets whose key grants `socket.subscribe`. A platform key holding ' +
          '`overview.subscribe` that sends that method receives the fleet\'s events as `overview.event` frames (the dashboard); ' +
          '`overview.emit`, which carries them between the server\'s own processes, is internal: a frame naming it is refused (`forbidden`), whatever the key.',
        security: [{ bearer: [] }, {}],
        response: {
          403: errorReply(
            'The upgrade was refused: the host serves no organization, or the `Authorization` key is malformed, unknown, revoked or another organization\'s',
            ENVELOPE_ERRORS.notAuthorized,
            ENVELOPE_ERRORS.revoked,
          ),
        },
      } as FastifySchema,
    },
    async (socket: WebSocket, request: FastifyRequest) => {
      const organization = await app.organizationOf(request);
      if (!organization) {
        socket.close(1008, 'not authorized');
        return;
      }
      const organizationId = organization._id;
      if (server.state.isShed(organizationId)) {
        socket.close(1013, 'organization shed: try again later');
        return;
      }
      const sockets = byOrganization.get(organizationId) ?? new Set<WebSocket>();
      byOrganization.set(organizationId, sockets.add(socket));
      server.organizations?.socketOpened(organizationId);
      // Events only for a socket whose upgrade key (or the organization's defaults) grants `socket.subscribe`;
      // a browser, which cannot set headers on a WebSocket, subscribes with a `socket.subscribe` frame instead.
      if (upgradeGrants.get(request)?.organization_id === organizationId) subscribe(organizationId, socket);
      let leaveOverview: (() => void) | undefined;
      socket.on('close', () => {
        leaveOverview?.();
        unsubscribe(organizationId, socket);
        sockets.delete(socket);
        if (sockets.size === 0) byOrganization.delete(organizationId);
        server.organizations?.socketClosed(organizationId);
      });

      let badFrames = 0;
      socket.on('message', async (raw: Buffer, isBinary: boolean) => {
        let envelope: Record<string, unknown>;
        try {
          if (isBinary) throw new Error('binary');
          envelope = JSON.parse(raw.toString('utf8'));
          if (typeof envelope !== 'object' || envelope === null || Array.isArray(envelope)) throw new Error('not an object');
        } catch {
          // Only frames that are not envelopes at all count toward the close; a refused envelope is an answer.
          send(socket, { id: null, ok: false, error: errorAnswer('bad_frame', 'each frame must be a JSON object envelope') });
          if (++badFrames >= MAX_BAD_FRAMES) socket.close(1008, 'too many invalid frames');
          return;
        }
        const { requestId, ...rest } = envelope;
        const id = typeof requestId === 'string' || typeof requestId === 'number' ? requestId : null;
        try {
          // `value` / `organizations` and `data` made one before authorization, as on `/control`.
          const folded = typeof rest.method === 'string' && Object.hasOwn(DATA_ALIASES, rest.method) ? withDataAlias(rest) : rest;
          const authorized = await app.authorize.request(authorizationRequest(request), folded);
          if (authorized.method === 'socket.subscribe' && authorized.organization_id === organizationId) {
            subscribe(organizationId, socket);
            return send(socket, { id, ok: true, result: { subscribed: true } });
          }
          if (authorized.method === OVERVIEW_SUBSCRIBE && authorized.organization_id === organizationId) {
            leaveOverview ??= overviewSubscribers.add((data) => send(socket, { event: OVERVIEW_EVENT, data }));
            return send(socket, { id, ok: true, result: { subscribed: true } });
          }
          send(socket, { id, ok: true, result: await dispatch(authorized, rest.organization_id !== undefined, request.log) });
        } catch (error) {
          const answer = answerOf(error);
          if (!answer) request.log.error({ err: error }, 'websocket frame failed');
          send(socket, { id, ok: false, error: answer ?? errorAnswer('internal', 'internal error') });
        }
      });
    },
  );
};

export default ws;
