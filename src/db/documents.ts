import { Type, type Static, type TSchema } from '@sinclair/typebox';
import { lazyCheck, type SchemaCheck } from '../schema/lazy-check.js';
import { Permissions, type Permissions as PermissionsMap } from '../schema/permissions.js';
import { InvalidInputError } from './errors.js';

const Id = Type.String({ minLength: 1, maxLength: 256 });
const Name = Type.String({ minLength: 1, maxLength: 128 });
const IsoTime = Type.String({ pattern: '^\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}(\\.\\d{1,9})?(Z|[+-]\\d{2}:\\d{2})$', description: 'ISO 8601 time' });
/** A normalized host name: lower case, no port, IPv6 without brackets. */
export const Hostname = Type.String({ minLength: 1, maxLength: 253, pattern: '^[a-z0-9_.:-]+$' });
export const KEY_ID_PATTERN = '^fpk_[A-Za-z0-9_-]{16}$';
/** A browser origin, scheme://host[:port]: the rule of the global `http.cors.origins`. */
export const CorsOrigin = Type.String({ minLength: 1, maxLength: 256, pattern: '^https?://[^/\\s]+$' });
/** Browser origins allowed to call this organization's hosts cross-origin, besides the global `http.cors.origins`. */
export const OrganizationCors = Type.Object({ origins: Type.Array(CorsOrigin, { maxItems: 256 }) }, { additionalProperties: false });

const tenant = { organization_id: Id };
const open = { additionalProperties: true };

export const OrganizationDocument = Type.Object(
  {
    _id: Id,
    name: Name,
    hosts: Type.Array(Hostname, { minItems: 1, maxItems: 256, description: 'Host names that reach this organization; unique across organizations' }),
    defaultPermissions: Type.Optional(Permissions),
    cors: Type.Optional(OrganizationCors),
    platform: Type.Optional(Type.Boolean({ description: 'The organization that owns the servers of this store (set once, by the first start or init)' })),
    createdAt: IsoTime,
  },
  open,
);

export const KeyDocument = Type.Object(
  {
    _id: Type.String({ pattern: KEY_ID_PATTERN, description: 'Public key id, the part of the key before the dot' }),
    ...tenant,
    name: Name,
    secretHash: Type.String({ pattern: '^[0-9a-f]{64}$', description: 'SHA-256 of the secret, never the secret' }),
    admin: Type.Boolean(),
    permissions: Permissions,
    hosts: Type.Optional(Type.Array(Hostname, { maxItems: 256 })),
    expiresAt: Type.Optional(IsoTime),
    /** A key a parent issued to a server it created: `/manager` serves it for this cluster only. */
    cluster_id: Type.Optional(Id),
    disabled: Type.Boolean(),
    createdAt: IsoTime,
  },
  { additionalProperties: false },
);

export const ServerDocument = Type.Object(
  { _id: Id, organization_id: Type.Optional(Id), cluster_id: Type.Optional(Id), name: Type.Optional(Name), master: Type.Optional(Type.Object({}, open)), workers: Type.Optional(Type.Object({}, open)) },
  open,
);
export const ClusterDocument = Type.Object({ _id: Id, ...tenant, name: Type.Optional(Name) }, open);
export const ServersConfigDocument = Type.Object({ _id: Id, ...tenant, name: Name, type: Type.String({ minLength: 1, maxLength: 64 }) }, open);
export const ApiDocument = Type.Object(
  {
    _id: Id,
    ...tenant,
    name: Name,
    baseUrl: Type.String({ minLength: 1, maxLength: 2048 }),
    timeoutMs: Type.Optional(Type.Integer({ minimum: 1 })),
    endpoints: Type.Record(Type.String(), Type.Object({ method: Type.String({ minLength: 1 }), path: Type.String() }, open)),
  },
  open,
);
export const WorkflowDocument = Type.Object({ _id: Id, ...tenant, name: Name, steps: Type.Array(Type.Object({ name: Name }, open)) }, open);
export const WebhookDocument = Type.Object({ _id: Id, ...tenant, name: Name }, open);
export const RepositoryUploadReservationDocument = Type.Object({ _id: Id, ...tenant, cluster_id: Id, url: Type.String({ minLength: 1 }), createdAt: IsoTime }, open);

// `Static` cannot express the restriction objects of `Permissions`; the written-out type stands in for it.
export type OrganizationDocument = Omit<Static<typeof OrganizationDocument>, 'defaultPermissions'> & { defaultPermissions?: PermissionsMap };
export type KeyDocument = Omit<Static<typeof KeyDocument>, 'permissions'> & { permissions: PermissionsMap };

/** The collections of SPEC 7.2 and the shape every inserted document must have. */
export const COLLECTION_SCHEMAS = {
  organizations: OrganizationDocument,
  keys: KeyDocument,
  servers: ServerDocument,
  clusters: ClusterDocument,
  servers_config: ServersConfigDocument,
  apis: ApiDocument,
  workflows: WorkflowDocument,
  webhooks: WebhookDocument,
  repository_upload_reservations: RepositoryUploadReservationDocument,
} satisfies Record<string, TSchema>;

export type CollectionName = keyof typeof COLLECTION_SCHEMAS;

/** Unique indexes every store carries. Host names are unique across organizations; names within one. */
export const STANDARD_INDEXES: ReadonlyArray<{ collection: CollectionName; fields: Record<string, 1> }> = [
  { collection: 'organizations', fields: { hosts: 1 } },
  { collection: 'servers_config', fields: { organization_id: 1, name: 1 } },
  { collection: 'apis', fields: { organization_id: 1, name: 1 } },
  { collection: 'workflows', fields: { organization_id: 1, name: 1 } },
  { collection: 'webhooks', fields: { organization_id: 1, name: 1 } },
  { collection: 'repository_upload_reservations', fields: { organization_id: 1, cluster_id: 1, url: 1 } },
];

const checks = new Map<string, SchemaCheck<TSchema>>(Object.entries(COLLECTION_SCHEMAS).map(([name, schema]) => [name, lazyCheck(schema)]));

/** Documents written to a SPEC 7.2 collection must match its schema; other collections are free-form. */
export function assertCollectionDocument(collection: string, document: unknown): void {
  const check = checks.get(collection);
  if (!check || check.Check(document)) return;
  const error = check.Errors(document).First();
  const field = error?.path.replace(/^\//, '').replaceAll('/', '.') || 'document';
  throw new InvalidInputError(`invalid ${collection} document: ${field}: ${error?.message ?? 'does not match the schema'}`);
}
