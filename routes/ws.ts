import type { FastifyPluginAsync, FastifyRequest, FastifySchema } from 'fastify';
import websocket from '@fastify/websocket';
import type { WebSocket } from 'ws';
import { normalizeHost } from '../src/auth/host.js';
import { AuthorizationError } from '../src/auth/errors.js';
import { IpcError } from '../src/ipc/envelope.js';
import { authorizationRequest } from '../plugins/authorize.js';
import { websocketErrorHandler } from '../plugins/errors.js';
import { controlEnvelope } from './control.js';
import { isCrudMethod } from '../src/crud/envelope.js';
import { CrudError } from '../src/crud/errors.js';
import { runCrud } from '../src/crud/run.js';
import type { Server } from '../src/server.js';

const MAX_FRAME_BYTES = 1024 * 1024;
/** Bad frames tolerated per socket before it is closed with 1008 (policy violation). */
export const MAX_BAD_FRAMES = 5;
const CONTROL_METHODS = new Set(['status', 'cordon', 'drain', 'shed', 'restart', 'reboot', 'shutdown']);

type Frame = { id?: string | number | null; ok: boolean; result?: unknown; error?: { code: string; message: string } } | { event: string; data: unknown };

/**
 * `GET /ws`: a WebSocket per browser or service. Each incoming frame is an envelope, authorized like an HTTP
 * one (the key from the upgrade's `Authorization` header or the envelope's `apikey`); answers carry the
 * caller's `requestId`. Targeted events (`socket.emit` envelopes) go out to the organization's sockets.
 */
const ws: FastifyPluginAsync = async (app) => {
  const server = app.fleetplane as unknown as Server;
  const byOrganization = new Map<string, Set<WebSocket>>();
  /** SPEC 8.6: the sockets that receive their organization's events, admitted by `socket.subscribe`. */
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

  server.state?.onShedChange?.((shed) => closeAll(1013, 'organization shed: try again later', shed));
  // Draining or stopping: WebSockets are told to go elsewhere before the worker waits for its connections.
  server.on?.('status_change', ({ worker, newStatus }) => {
    if (worker === server.workerId && (newStatus === 'draining' || newStatus === 'stopping')) closeAll(1001, 'server going away');
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

  app.get(
    '/ws',
    {
      websocket: true,
      schema: { tags: ['control'], summary: 'WebSocket: authorized envelopes in, replies and targeted events out', security: [{ bearer: [] }, {}] } as FastifySchema,
    },
    async (socket: WebSocket, request: FastifyRequest) => {
      const host = normalizeHost(request.host);
      const organization = host ? await server.authorize?.directory.organizationForHost(host) : null;
      if (!organization) {
        // The same words as any refusal: a socket must not learn which hosts exist.
        socket.close(1008, 'not authorized');
        return;
      }
      const organizationId = organization._id;
      if (server.state?.isShed(organizationId)) {
        socket.close(1013, 'organization shed: try again later');
        return;
      }
      const sockets = byOrganization.get(organizationId) ?? new Set<WebSocket>();
      byOrganization.set(organizationId, sockets.add(socket));
      server.organizations?.socketOpened(organizationId);
      // Events only for a socket whose upgrade key (or the organization's defaults) grants `socket.subscribe`;
      // a browser, which cannot set headers on a WebSocket, subscribes with a `socket.subscribe` frame instead.
      if (request.headers.authorization !== undefined || organization.defaultPermissions) {
        app.authorize.request(authorizationRequest(request), { method: 'socket.subscribe' }).then(
          (authorized) => {
            if (authorized.organization_id === organizationId && socket.readyState === socket.OPEN) subscribe(organizationId, socket);
          },
          () => {},
        );
      }
      socket.on('close', () => {
        unsubscribe(organizationId, socket);
        sockets.delete(socket);
        if (sockets.size === 0) byOrganization.delete(organizationId);
        server.organizations?.socketClosed(organizationId);
      });

      let badFrames = 0;
      const refuse = (id: string | number | null, code: string, message: string) => {
        send(socket, { id, ok: false, error: { code, message } });
        if (++badFrames >= MAX_BAD_FRAMES) socket.close(1008, 'too many invalid frames');
      };
      socket.on('message', async (raw: Buffer, isBinary: boolean) => {
        let envelope: Record<string, unknown>;
        try {
          if (isBinary) throw new Error('binary');
          envelope = JSON.parse(raw.toString('utf8'));
          if (typeof envelope !== 'object' || envelope === null || Array.isArray(envelope)) throw new Error('not an object');
        } catch {
          return refuse(null, 'bad_frame', 'each frame must be a JSON object envelope');
        }
        const { requestId, ...rest } = envelope;
        const id = typeof requestId === 'string' || typeof requestId === 'number' ? requestId : null;
        try {
          const authorized = await app.authorize.request(authorizationRequest(request), rest);
          if (authorized.method === 'socket.subscribe' && authorized.organization_id === organizationId) {
            subscribe(organizationId, socket);
            badFrames = 0;
            return send(socket, { id, ok: true, result: { subscribed: true } });
          }
          if (isCrudMethod(authorized.method)) {
            const result = await runCrud(server.db, authorized);
            badFrames = 0;
            return send(socket, { id, ok: true, result });
          }
          if (!CONTROL_METHODS.has(authorized.method)) {
            return refuse(id, 'unknown_method', `"${authorized.method}" is not served over the WebSocket`);
          }
          const routed = controlEnvelope(authorized, rest.organization_id !== undefined);
          request.log.info({ key_id: authorized.user?.key_id ?? null, organization: organizationId, method: routed.method, target: { ...routed, data: undefined } }, 'control request');
          const result = await server.request(routed);
          badFrames = 0;
          send(socket, { id, ok: true, result });
        } catch (error) {
          // A refused CRUD envelope (a duplicate name, a bad filter) is an answer, not abuse of the socket.
          if (error instanceof CrudError) return send(socket, { id, ok: false, error: { code: error.code, message: error.message } });
          if (error instanceof AuthorizationError || error instanceof IpcError) {
            const code = error.code;
            return refuse(id, code, error.message);
          }
          request.log.error({ err: error }, 'websocket frame failed');
          send(socket, { id, ok: false, error: { code: 'internal', message: 'internal error' } });
        }
      });
    },
  );
};

export default ws;
