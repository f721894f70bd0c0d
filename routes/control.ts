import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { ErrorReply } from '../schemas/common.js';
import { ControlReply, ControlRequest } from '../schemas/control.js';
import { IpcError, asList } from '../src/ipc/envelope.js';
import { assertHostControlAllowed } from '../src/state/host-control.js';
import type { AuthorizedEnvelope } from '../src/auth/envelope.js';

const ROUTED_FIELDS = ['method', 'data', 'server', 'cluster', 'worker', 'master', 'broadcast', 'confirm', 'timeoutMs'] as const;

/**
 * The envelope to route, from what was authorized. Organization scope is the caller's own organization:
 * always for a tenant (SPEC 8.4: authorization refused it any server-level target, so it reaches only the
 * workers serving its organization, here and on peers), and for a platform key when the body asked for it.
 */
export function controlEnvelope(authorized: AuthorizedEnvelope, requestedScope: boolean): Record<string, unknown> {
  const envelope: Record<string, unknown> = {};
  for (const field of ROUTED_FIELDS) if (authorized[field] !== undefined) envelope[field] = authorized[field];
  if (!authorized.user?.platform || requestedScope) envelope.organization_id = authorized.organization_id;
  return envelope;
}

/** `POST /control`: an authorized IPC envelope → `server.request()` → the replies of every target. */
const control: FastifyPluginAsyncTypebox = async (app) => {
  app.post(
    '/control',
    {
      config: { envelope: true },
      schema: {
        tags: ['control'],
        summary: 'Send a control envelope (status, cordon, drain, shed, restart, reboot, shutdown, custom) to targets',
        security: [{ bearer: [] }],
        body: ControlRequest,
        response: { 200: ControlReply, 400: ErrorReply, 403: ErrorReply, 404: ErrorReply, 413: ErrorReply, 503: ErrorReply },
      },
      preHandler: app.authorizeEnvelope,
    },
    async (request, reply) => {
      reply.header('cache-control', 'no-store');
      const authorized = request.envelope!;
      const server = app.fleetplane;
      const envelope = controlEnvelope(authorized, request.body.organization_id !== undefined);
      try {
        const here = !envelope.server || asList(envelope.server as string | string[])!.includes(server.id);
        if ((envelope.method === 'reboot' || envelope.method === 'shutdown') && here) {
          assertHostControlAllowed(server.config.lifecycle, server.id, envelope.confirm);
        }
        request.log.info(
          { key_id: authorized.user?.key_id ?? null, organization: authorized.organization_id, method: envelope.method, target: { ...envelope, data: undefined } },
          'control request',
        );
        return await server.request(envelope, { timeoutMs: envelope.timeoutMs as number | undefined });
      } catch (error) {
        if (error instanceof IpcError && error.status < 500) return reply.code(error.status as 400 | 403 | 404 | 413).send({ error: { code: error.code, message: error.message } });
        throw error;
      }
    },
  );
};

export default control;
