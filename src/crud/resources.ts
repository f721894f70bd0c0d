import { Type, type Static } from '@sinclair/typebox';
import { TypeCompiler } from '@sinclair/typebox/compiler';
import { schemaViolation } from '../api/schema-violation.js';
import { normalizeHosts } from '../auth/host.js';
import { Permissions } from '../schema/permissions.js';
import { OrganizationCors } from '../db/documents.js';
import { StoreError } from '../db/errors.js';
import { serializeDocument } from '../db/validate.js';
import { definitionViolation } from './checked-writes.js';

/** Kinds in the order they are applied: organizations first, then what workflows and webhooks call. */
export const RESOURCE_KINDS = ['organizations', 'servers_config', 'apis', 'workflows', 'webhooks'] as const;
export type ResourceKind = (typeof RESOURCE_KINDS)[number];
export const MAX_RESOURCES_PER_KIND = 1000;

const Item = Type.Object({ name: Type.Unknown() }, { additionalProperties: true });
const List = Type.Optional(Type.Array(Item, { maxItems: MAX_RESOURCES_PER_KIND }));

/** A resource file for `fleetplane apply -f` (SPEC 11.3): lists of resources by kind, each named. */
export const ResourceFile = Type.Object(
  { apis: List, workflows: List, webhooks: List, servers_config: List, organizations: List },
  { additionalProperties: false },
);
export type ResourceFile = Partial<Record<ResourceKind, Array<Record<string, unknown> & { name: string }>>>;

export const OrganizationResource = Type.Object(
  {
    name: Type.String({ minLength: 1, maxLength: 128 }),
    hosts: Type.Array(Type.String({ minLength: 1, maxLength: 300 }), { minItems: 1, maxItems: 256 }),
    defaultPermissions: Type.Optional(Permissions),
    cors: Type.Optional(OrganizationCors),
  },
  { additionalProperties: false },
);
export type OrganizationResource = Static<typeof OrganizationResource>;

export const ServersConfigResource = Type.Object(
  { name: Type.String({ minLength: 1, maxLength: 128 }), type: Type.String({ minLength: 1, maxLength: 64 }) },
  { additionalProperties: true, description: 'Free-form server configuration of a type (e.g. routing)' },
);

const fileCheck = TypeCompiler.Compile(ResourceFile);
const organizationCheck = TypeCompiler.Compile(OrganizationResource);
const serversConfigCheck = TypeCompiler.Compile(ServersConfigResource);
/** Fields the store manages; a resource file that sets them is mistaken about what it is writing. */
const MANAGED_FIELDS = ['_id', 'organization_id', 'createdAt', 'updatedAt'];

const VIOLATIONS: Record<ResourceKind, (value: unknown, where: string) => string | undefined> = {
  organizations: (value, where) => {
    const violation = schemaViolation(organizationCheck, value, where);
    if (violation) return violation;
    return normalizeHosts((value as OrganizationResource).hosts) ? undefined : `${where}.hosts: not host names`;
  },
  servers_config: (value, where) => schemaViolation(serversConfigCheck, value, where),
  // The check CRUD writes get too (see `assertWritable`): the one the runtime compiles them with.
  apis: (value, where) => definitionViolation('apis', value as Record<string, unknown>, where),
  workflows: (value, where) => definitionViolation('workflows', value as Record<string, unknown>, where),
  webhooks: (value, where) => definitionViolation('webhooks', value as Record<string, unknown>, where),
};

export class ResourceFileError extends Error {
  override readonly name = 'ResourceFileError';
}

/**
 * Checks a whole file before anything is written: the shape, every resource against its kind's schema (the
 * same checks the server applies when it uses them), unique names per kind, and that each one can be stored.
 */
export function validateResourceFile(value: unknown): ResourceFile {
  const shape = schemaViolation(fileCheck, value);
  if (shape) throw new ResourceFileError(shape);
  const file = value as ResourceFile;
  for (const kind of RESOURCE_KINDS) {
    const names = new Set<string>();
    for (const [index, resource] of (file[kind] ?? []).entries()) {
      const where = `${kind}.${index}`;
      const managed = MANAGED_FIELDS.find((field) => Object.hasOwn(resource, field));
      if (managed) throw new ResourceFileError(`${where}.${managed}: set by the store, not by resource files`);
      const violation = VIOLATIONS[kind](resource, where);
      if (violation) throw new ResourceFileError(violation);
      if (names.has(resource.name)) throw new ResourceFileError(`${where}.name: "${resource.name}" appears twice in ${kind}`);
      names.add(resource.name);
      try {
        serializeDocument(resource);
      } catch (error) {
        if (error instanceof StoreError) throw new ResourceFileError(`${where}: ${error.message}`);
        throw error;
      }
    }
  }
  return file;
}
