import { hostname } from 'node:os';
import { Type, type Static } from '@sinclair/typebox';
import { Value } from '@sinclair/typebox/value';
import type { OrganizationDocument } from '../db/documents.js';
import { DuplicateKeyError } from '../db/errors.js';
import { newId } from '../db/ids.js';
import type { Store } from '../db/types.js';
import { TenancyError } from './errors.js';
import { normalizeHost, normalizeHosts } from './host.js';
import { Permissions, type Permissions as PermissionsMap } from '../schema/permissions.js';

export const CreateOrganizationInput = Type.Object(
  {
    name: Type.String({ minLength: 1, maxLength: 128 }),
    hosts: Type.Array(Type.String({ minLength: 1, maxLength: 300 }), { minItems: 1, maxItems: 256 }),
    defaultPermissions: Type.Optional(Permissions),
  },
  { additionalProperties: false },
);
// `Static` cannot express the restriction objects of `Permissions`; the written-out type stands in for it.
export type CreateOrganizationInput = Omit<Static<typeof CreateOrganizationInput>, 'defaultPermissions'> & { defaultPermissions?: PermissionsMap };

/** An organization id as the store makes them (`newId`): 12 hex digits of time, 12 random ones. */
export const ORGANIZATION_ID_PATTERN = /^[0-9a-f]{24}$/;

/**
 * Creates an organization reached through `hosts`; a host already taken by another organization is refused.
 * `id` gives it the id it already has in another store (a tenant's stores share its id); default: a new one.
 */
export async function createOrganization(store: Store, input: CreateOrganizationInput, options: { id?: string } = {}): Promise<OrganizationDocument> {
  if (options.id !== undefined && !ORGANIZATION_ID_PATTERN.test(options.id)) throw new TenancyError(`invalid organization: _id: not an organization id: ${options.id}`);
  if (!Value.Check(CreateOrganizationInput, input)) {
    const error = Value.Errors(CreateOrganizationInput, input).First();
    throw new TenancyError(`invalid organization: ${error?.path.replace(/^\//, '').replaceAll('/', '.') || 'input'}: ${error?.message ?? 'invalid'}`);
  }
  const hosts = normalizeHosts(input.hosts);
  if (!hosts) throw new TenancyError(`invalid organization: hosts: not host names: ${input.hosts.join(', ')}`);
  // The first organization of a store is the platform organization (SPEC 8.4): the one that owns its servers.
  const platform = (await store.collection('organizations').countDocuments()) === 0;
  const document: OrganizationDocument = {
    _id: options.id ?? newId(),
    name: input.name,
    hosts,
    ...(input.defaultPermissions ? { defaultPermissions: input.defaultPermissions } : {}),
    ...(platform ? { platform: true } : {}),
    createdAt: new Date().toISOString(),
  };
  try {
    await store.collection('organizations').insertOne(document);
  } catch (error) {
    if (error instanceof DuplicateKeyError) throw new TenancyError(`a host is already served by another organization: ${JSON.stringify(error.key)}`);
    throw error;
  }
  return document;
}

/** The organization made first (by `init`), the default for commands given no `--org`. */
export async function firstOrganization(store: Store): Promise<OrganizationDocument | null> {
  return store.collection<OrganizationDocument>('organizations').findOne({}, { sort: { _id: 1 } });
}

/**
 * SPEC 8.4: the organization that owns the server: `configured` (`server.organization`) when given, else the one
 * marked when the store was initialized, else (a store from before the mark) the first one made.
 */
export async function platformOrganizationId(store: Store, configured?: string): Promise<string | null> {
  if (configured) return configured;
  const organizations = store.collection<OrganizationDocument>('organizations');
  const marked = await organizations.findOne({ platform: true }, { projection: { _id: 1 }, sort: { _id: 1 } });
  return (marked ?? (await firstOrganization(store)))?._id ?? null;
}

/** Hosts of the organization `start` creates on an empty store: this machine under its usual names. */
export function localHosts(): string[] {
  const names = ['localhost', '127.0.0.1', '::1', hostname()].map(normalizeHost).filter((host): host is string => host !== undefined);
  return [...new Set(names)];
}
