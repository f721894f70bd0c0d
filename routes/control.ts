import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { ENVELOPE_ERRORS, errorReply, permissionDenied } from '../schemas/errors.js';
import { ControlReply, ControlRequest } from '../schemas/control.js';
import { IpcError, asList, withDataAlias } from '../src/ipc/envelope.js';
import { assertHostControlAllowed } from '../src/state/host-control.js';
import { internalViolation } from '../src/auth/authority.js';
import type { AuthorizedEnvelope } from '../src/auth/envelope.js';

const ROUTED_FIELDS = ['method', 'data', 'value', 'organizations', 'server', 'cluster', 'worker', 'master', 'broadcast', 'confirm', 'timeoutMs'] as const;

/**
 * The envelope to route, from what was authorized. Organization scope is the caller's own organization:
 * always for a tenant (authorization refused it any server-level target, so it reaches only the workers
 * serving its organization, here and on peers), and for a platform key when the body asked for it.
 */
export function controlEnvelope(authorized: AuthorizedEnvelope, requestedScope: boolean): Record<string, unknown> {
  const envelope: Record<string, unknown> = {};
  for (const field of ROUTED_FIELDS) if (authorized[field] !== undefined) envelope[field] = authorized[field];
  if (!authorized.user?.platform || requestedScope) envelope.organization_id = authorized.organization_id;
  return envelope;
}

/**
 * Before authorization: `value` / `organizations` and `data` made one (SPEC 5.4), so a key's restriction on
 * either field holds whichever the caller wrote; both given and different is a 400 naming the two.
 */
export function foldDataAlias(request: FastifyRequest, _reply: FastifyReply, done: (error?: IpcError) => void): void {
  try {
    request.body = withDataAlias(request.body as Record<string, unknown>);
  } catch (error) {
    return done(error as IpcError);
  }
  done();
}

/** `POST /control`: an authorized IPC envelope → `server.request()` → the replies of every target. */
const control: FastifyPluginAsyncTypebox = async (app) => {
  app.post(
    '/control',
    {
      config: { envelope: true },
      schema: {
        tags: ['control'],
        operationId: 'sendControlEnvelope',
        summary: 'Send a control envelope (status, cordon, drain, shed, restart, reboot, shutdown, custom) to targets',
        description:
          'Routes the envelope to its targets — `server`, `cluster`, `worker`, `master`, `broadcast` — here and on mesh peers, ' +
          'and answers with the reply of each target that answered within `timeoutMs` and the list of those that did not. ' +
          "A tenant's key reaches only the workers serving its own organization. Served even when this node's workers take no " +
          'traffic, so a node whose workers are all cordoned can be uncordoned. `cordon` and `drain` take `value: true|false` and ' +
          '`shed` takes `organizations: [ids]|false`, as the design documents write them, or the same argument as `data` ' +
          '(both given must agree). A method whose subsystem is off here answers `disabled`, naming the setting. ' +
          'A `cordon` or `drain` that takes out the last serving workers first turns `/readyz` to 503 for the readiness grace ' +
          '(`lifecycle.readinessGraceMs`) and is applied after it: it is answered at once, `{ accepted: true, effectiveInMs }` ' +
          '(with `data: { value, wait: true }`, once applied). `shed` acts on a whole server: address its primary; a `worker` ' +
          'target is refused. `restart` addressed to the primary is the hand-over to a new primary (answered once the new one is ' +
          'started, with its pid); sent to the workers with `broadcast` it is the rolling restart of them all, with `worker` the ' +
          'replacement of that one.',
        security: [{ bearer: [] }],
        body: ControlRequest,
        response: {
          200: ControlReply,
          400: errorReply(
            'The body is not valid JSON, or the envelope or its target is invalid',
            ENVELOPE_ERRORS.invalidJson,
            { code: 'invalid_request', message: 'wroker: unknown field' },
            { code: 'no_target', message: 'the envelope names no target (server, cluster, worker, master, broadcast or organization_id)' },
            { code: 'invalid_target', message: 'shed applies to the whole server: use master: true or server: <id>, not worker' },
            { code: 'bad_request', message: 'confirm must be this server\'s id ("srv-a")' },
            {
              code: 'bad_request',
              message: 'value and data disagree (value: true, data: false): value is the same as data for cordon; send one of them, or the same in both',
            },
          ),
          403: errorReply(
            'The key is missing, unknown, revoked or expired, may not send this method, names an internal method (only the server\'s own processes send those, whatever the key), or asks for host control where it is disabled',
            ENVELOPE_ERRORS.notAuthorized,
            permissionDenied('cordon'),
            {
              code: 'platform_only',
              message: 'the "worker" target selects server processes; only the platform organization may use it (a tenant\'s envelopes are scoped to its organization)',
            },
            { code: 'forbidden', message: 'host control is disabled on this server (lifecycle.hostControl)' },
            { code: 'forbidden', message: internalViolation('overview.emit')! },
          ),
          404: errorReply('The primary has no handler for this method', { code: 'unknown_method', message: 'no handler for "rotate"' }),
          413: errorReply('The body is larger than 1 MiB, or the envelope is larger than IPC carries', ENVELOPE_ERRORS.tooLarge),
          503: errorReply('The envelope could not be routed: the primary did not answer', { code: 'unavailable', message: 'internal error' }),
        },
      },
      preHandler: [foldDataAlias, app.authorizeEnvelope],
    },
    async (request, reply) => {
      reply.header('cache-control', 'no-store');
      const authorized = request.envelope!;
      const server = app.fleetplane;
      const envelope = controlEnvelope(authorized, request.body.organization_id !== undefined);
      const here = !envelope.server || asList(envelope.server as string | string[])!.includes(server.id);
      if ((envelope.method === 'reboot' || envelope.method === 'shutdown') && here) {
        assertHostControlAllowed(server.config.lifecycle, server.id, envelope.confirm);
      }
      request.log.info(
        { key_id: authorized.user?.key_id ?? null, organization: authorized.organization_id, method: envelope.method, target: { ...envelope, data: undefined } },
        'control request',
      );
      return server.request(envelope, { timeoutMs: envelope.timeoutMs as number | undefined });
    },
  );
};

export default control;
