import { Type, type Static } from '@sinclair/typebox';
import { INVENTORY_COLLECTIONS, SERVERS } from '../inventory/records.js';

/** SPEC 13.3: what `/manager` does. Keys are authorized for `manager.<method>` (a `manager` grant covers all). */
export const MANAGER_METHODS = ['object.update', 'object.delete', 'createServer', 'terminateServer'] as const;
export type ManagerMethod = (typeof MANAGER_METHODS)[number];
/** Collections the manager writes in the parent scope: the inventory's. */
export const MANAGER_COLLECTIONS = INVENTORY_COLLECTIONS;

const Id = Type.String({ minLength: 1, maxLength: 256 });
const Deployment = Type.Object(
  { cloud: Type.String({ minLength: 1, maxLength: 64, description: 'The provider API that makes the server (e.g. local, hetzner)' }) },
  { additionalProperties: true, description: "Where and how: `cloud` names the provider; the rest is the provider's" },
);

export const ManagerEnvelope = Type.Object(
  {
    method: Type.String({ description: 'object.update, object.delete, createServer or terminateServer; or an HTTP verb (post, get...) for a provider request', examples: ['createServer'] }),
    apikey: Type.Optional(Type.Unknown({ description: 'Key, when not sent as a Bearer token' })),
    collection: Type.Optional(Type.String({ description: 'object.update / object.delete: servers or clusters' })),
    filter: Type.Optional(Type.Object({}, { additionalProperties: true })),
    update: Type.Optional(Type.Object({}, { additionalProperties: true })),
    cluster: Type.Optional(Type.Union([Id, Type.Object({ _id: Id }, { additionalProperties: true })], { description: 'createServer / terminateServer: the cluster (id)' })),
    deployment: Type.Optional(Deployment),
    server_id: Type.Optional(Id),
    api: Type.Optional(Type.String({ minLength: 1, maxLength: 64, description: 'The provider API the key is authorized for; must match deployment.cloud (and, in a provider request, a cloud named in data)' })),
    endpoint: Type.Optional(Type.String({ minLength: 1, maxLength: 64, description: 'Provider request: the endpoint of the api' })),
    data: Type.Optional(Type.Object({}, { additionalProperties: true, description: "Provider request: the endpoint's path parameters and body" })),
  },
  {
    additionalProperties: true,
    $id: 'ManagerEnvelope',
    examples: [
      { method: 'createServer', cluster: '0190c0ffee0000c1a5', deployment: { cloud: 'local', workers: 1 } },
      { method: 'object.update', collection: SERVERS, filter: { _id: '0190c0ffee0000b0b0' }, update: { $set: { 'master.status': 'running' } } },
      { api: 'hetzner', endpoint: 'create-instance', method: 'post', data: { cluster_id: '0190c0ffee0000c1a5', server_type: 'cx22' } },
    ],
  },
);
export type ManagerEnvelope = Static<typeof ManagerEnvelope>;

export const ManagerReply = Type.Object(
  {
    server_id: Type.Optional(Type.String()),
    cluster_id: Type.Optional(Type.String()),
    instanceId: Type.Optional(Type.String()),
    status: Type.Optional(Type.Union([Type.String(), Type.Integer()], { description: "createServer: the server's status; a provider request: the upstream's HTTP status" })),
    data: Type.Optional(Type.Unknown({ description: "Provider request: the upstream's body, JSON-parsed when JSON" })),
    matchedCount: Type.Optional(Type.Integer()),
    modifiedCount: Type.Optional(Type.Integer()),
    deletedCount: Type.Optional(Type.Integer()),
    provider: Type.Optional(Type.Unknown({ description: "terminateServer: the provider's answer" })),
  },
  { $id: 'ManagerReply', description: 'createServer / terminateServer: the server and its status; object.*: counts; a provider request: `{ status, data }`', examples: [{ server_id: '0190c0ffee0000b0b0', cluster_id: '0190c0ffee0000c1a5', instanceId: 'fp-local-6c1f0d2a9b3e4f50', status: 'starting' }] },
);
