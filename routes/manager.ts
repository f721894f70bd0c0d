import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { FailureLog } from '../plugins/errors.js';
import { Type } from '@sinclair/typebox';
import { ENVELOPE_ERRORS, answerOf, errorReply, permissionDenied } from '../schemas/errors.js';
import { ManagerReply, ManagerRequest } from '../schemas/manager.js';
import { METHOD_PREFIX } from '../src/manager/commands.js';
import { MANAGER_METHODS } from '../src/manager/envelope.js';
import { MANAGER_ERRORS, ManagerError, managesNoFleet } from '../src/manager/errors.js';
import type { ManagerEnvelopeHandler } from '../src/manager/manager.js';
import { isProviderRequest } from '../src/manager/provider-request.js';
import { API_ERRORS } from '../src/api/errors.js';

export interface ManagerRouteOptions {
  /** Default: the server's `manager`. */
  manager?: ManagerEnvelopeHandler;
}

/**
 * Before validation and authorization: the method (from the body, or the path `/manager/<method>`) must be a
 * manager method, and the key is then authorized for `manager.<method>`, never for the CRUD method of that name.
 */
function prepareEnvelope(request: FastifyRequest, _reply: FastifyReply, done: (error?: ManagerError) => void): void {
  // Callback style (no promise per request): a refusal goes to the error handler.
  done(checkMethod(request));
}

function checkMethod(request: FastifyRequest): ManagerError | undefined {
  const body = request.body;
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return undefined;
  const fields = body as Record<string, unknown>;
  const fromPath = (request.params as { '*'?: string })['*'];
  if (fromPath !== undefined) {
    if (fields.method !== undefined && fields.method !== fromPath) {
      return MANAGER_ERRORS.invalidEnvelope(`method: the body says "${String(fields.method).slice(0, 128)}", the path "${fromPath.slice(0, 128)}"`);
    }
    fields.method = fromPath;
  }
  if (typeof fields.method !== 'string') return MANAGER_ERRORS.invalidEnvelope('method: is required');
  // A provider request is authorized on its own method (`post`...) with its api/endpoint/data restrictions, as on `/api`.
  if (isProviderRequest(fields)) return undefined;
  if (!(MANAGER_METHODS as readonly string[]).includes(fields.method)) return MANAGER_ERRORS.unknownMethod(fields.method.slice(0, 128));
  fields.method = METHOD_PREFIX + fields.method;
  return undefined;
}

/** A provider's or the parent's failure is logged by the error handler naming the method (and the provider). */
const failureLog: FailureLog = { message: 'manager request failed', context: (request) => ({ method: request.envelope?.method, api: request.envelope?.api }) };

/** `POST /manager`, `POST /manager/<method>` (SPEC 13.3): the parent's control of the servers it manages. */
const manager: FastifyPluginAsyncTypebox<ManagerRouteOptions> = async (app, options) => {
  const service = options.manager ?? app.fleetplane.manager;
  const responses = {
    200: ManagerReply,
    400: errorReply(
      'The body is not valid JSON, names no manager collection, or does not fit its method',
      ENVELOPE_ERRORS.invalidJson,
      MANAGER_ERRORS.unknownCollection.example('keys'),
      MANAGER_ERRORS.cloudMismatch.example('deployment.cloud:', 'hetzner', 'local'),
    ),
    403: errorReply(
      'The key is not a platform key, may not call this method, or names a cluster it cannot reach (unknown clusters answer the same)',
      ENVELOPE_ERRORS.notAuthorized,
      permissionDenied('manager.createServer'),
      MANAGER_ERRORS.forbidden.example('the manager serves keys of the platform organization only'),
    ),
    404: errorReply(
      "The method is not a manager method (as an IPC target without a handler answers), the cluster has no such server, or a provider request names an api or endpoint the platform organization does not have (answered as on `/api`)",
      MANAGER_ERRORS.unknownMethod.example('object.read'),
      MANAGER_ERRORS.unknownServer.example('cluster 0190c0ffee0000c1a5 has no server 0190c0ffee0000b0b0'),
      API_ERRORS.unknownApi.example('hetzner'),
      API_ERRORS.unknownEndpoint.example('hetzner', 'reboot'),
    ),
    413: errorReply('The body is larger than 1 MiB', ENVELOPE_ERRORS.tooLarge),
    502: errorReply(
      'The provider refused or answered without an instance id, or a provider request\'s upstream failed',
      MANAGER_ERRORS.providerFailed.example('provider "hetzner" answered 422 to create'),
      MANAGER_ERRORS.providerInvalidReply.example(),
      API_ERRORS.upstreamFailed.example('hetzner', 500),
    ),
    503: errorReply('This server manages no fleet', answerOf(managesNoFleet())),
    504: errorReply("A provider request's upstream did not answer within the provider timeout", API_ERRORS.upstreamTimeout.example('hetzner', 10_000)),
  };
  const handler = async (request: FastifyRequest) => {
    if (!service) throw managesNoFleet();
    return service.handle(request.envelope!);
  };
  const common = { tags: ['manager'], security: [{ bearer: [] }], response: responses, body: ManagerRequest };
  const description =
    'For a platform (parent) server: `object.update` / `object.delete` on `servers` and `clusters` in the platform scope, ' +
    '`createServer` (records in both inventories, then the provider; the new server has the startup timeout to confirm) and ' +
    '`terminateServer` (`terminating` first, then the provider; records removed after the cleanup delay). Keys need ' +
    '`manager.<method>`; a key the manager gave a server reaches only that server\'s cluster. A provider request ' +
    '`{ api, endpoint, method, data }` (method: an HTTP verb) takes the `/api` path in the platform scope, authorized on its ' +
    "own method with the key's `api` / `endpoint` / `data` restrictions; a cloud named in `data` must be that `api`. " +
    'It answers `{ status, data }`.';
  app.post(
    '/manager',
    { config: { envelope: true, failureLog }, schema: { ...common, operationId: 'manage', summary: 'Manage the servers of tenant clusters', description }, preValidation: prepareEnvelope, preHandler: app.authorizeEnvelope },
    handler,
  );
  app.post(
    '/manager/*',
    {
      config: { envelope: true, failureLog },
      schema: { ...common, operationId: 'manageByPath', summary: 'As POST /manager, with the method in the path: /manager/<method>', description, params: Type.Object({ '*': Type.String() }) },
      preValidation: prepareEnvelope,
      preHandler: app.authorizeEnvelope,
    },
    handler,
  );
};

export default manager;
