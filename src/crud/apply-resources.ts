import { createOrganization } from '../auth/organizations.js';
import { normalizeHosts } from '../auth/host.js';
import type { Document, Store, Update } from '../db/types.js';
import { SecretUnreadableError } from '../secrets/errors.js';
import { transformDocument } from '../secrets/fields.js';
import type { SecretOpener } from '../secrets/keyring.js';
import { ResourceFileError, RESOURCE_KINDS, type OrganizationResource, type ResourceFile, type ResourceKind } from './resources.js';

export type Outcome = 'created' | 'changed' | 'unchanged';

export interface AppliedResource {
  kind: ResourceKind;
  name: string;
  outcome: Outcome;
  /** Top-level fields that differ (names only: values may be secrets). */
  fields?: string[];
}

export interface ApplyPlan {
  organizationId: string;
  resources: AppliedResource[];
  /** References the file makes to things it neither defines nor finds stored (code-registered workflows, say). */
  notes: string[];
  write(): Promise<void>;
}

const MANAGED = new Set(['_id', 'organization_id', 'createdAt', 'updatedAt']);

/** JSON with sorted keys: two documents are equal when their canonical texts are. */
function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  if (value && typeof value === 'object') {
    return `{${Object.keys(value)
      .sort()
      .map((key) => `${JSON.stringify(key)}:${canonical((value as Record<string, unknown>)[key])}`)
      .join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}

function changedFields(wanted: Record<string, unknown>, stored: Record<string, unknown>): string[] {
  const keys = new Set([...Object.keys(wanted), ...Object.keys(stored).filter((key) => !MANAGED.has(key))]);
  return [...keys].filter((key) => canonical(wanted[key]) !== canonical(stored[key])).sort();
}

/** Never equal to a wanted value: a stored secret that does not open is always rewritten from the file. */
const UNREADABLE = '\u0000unreadable secret';

/** A stored resource as a file would describe it: sealed secrets opened, for comparison only. */
function comparable(kind: ResourceKind, stored: Record<string, unknown>, secrets: SecretOpener | undefined): Record<string, unknown> {
  const organizationId = String(stored.organization_id ?? '');
  return transformDocument(kind, stored, (value, path) => {
    try {
      return secrets ? secrets.open(value, { organizationId, collection: kind, path }) : value;
    } catch (error) {
      if (error instanceof SecretUnreadableError) return UNREADABLE;
      throw error;
    }
  }, false);
}

function replacement(wanted: Record<string, unknown>, stored: Record<string, unknown>, now: string) {
  const removed = Object.keys(stored).filter((key) => !MANAGED.has(key) && !Object.hasOwn(wanted, key));
  return { $set: { ...wanted, updatedAt: now }, ...(removed.length ? { $unset: Object.fromEntries(removed.map((key) => [key, ''])) } : {}) };
}

/** Fields of an organization a resource file may leave out: left out, they are removed. */
const DESCRIBED_OPTIONAL = ['defaultPermissions', 'cors'] as const;

async function planOrganization(store: Store, resource: OrganizationResource, where: string, writes: Array<() => Promise<unknown>>, now: string): Promise<AppliedResource> {
  const collection = store.collection('organizations');
  const named = await collection.find({ name: resource.name }, { limit: 2 });
  if (named.length > 1) throw new ResourceFileError(`${where}.name: several organizations are named "${resource.name}"; apply needs one`);
  const existing = named[0];
  const hosts = normalizeHosts(resource.hosts)!;
  for (const host of hosts) {
    const owner = await collection.findOne({ hosts: host }, { projection: { _id: 1 } });
    if (owner && owner._id !== existing?._id) throw new ResourceFileError(`${where}.hosts: ${host} is served by another organization`);
  }
  const wanted = {
    name: resource.name,
    hosts,
    ...(resource.defaultPermissions ? { defaultPermissions: resource.defaultPermissions } : {}),
    ...(resource.cors ? { cors: resource.cors } : {}),
  };
  if (!existing) {
    const { cors, ...created } = wanted;
    writes.push(async () => {
      const organization = await createOrganization(store, created);
      if (cors) await collection.updateOne({ _id: organization._id }, { $set: { cors } });
    });
    return { kind: 'organizations', name: resource.name, outcome: 'created' };
  }
  // Only what a resource file describes: other fields of an organization belong to other subsystems.
  const described = { name: existing.name, hosts: existing.hosts, defaultPermissions: existing.defaultPermissions, cors: existing.cors };
  const fields = changedFields(wanted, described);
  if (fields.length === 0) return { kind: 'organizations', name: resource.name, outcome: 'unchanged' };
  const update: Update = { $set: { ...wanted, updatedAt: now } };
  const removed = DESCRIBED_OPTIONAL.filter((field) => existing[field] !== undefined && !Object.hasOwn(wanted, field));
  if (removed.length) update.$unset = Object.fromEntries(removed.map((field) => [field, '']));
  writes.push(() => collection.updateOne({ _id: existing._id }, update));
  return { kind: 'organizations', name: resource.name, outcome: 'changed', fields };
}

async function storedNames(store: Store, organizationId: string, kind: 'apis' | 'workflows'): Promise<Set<string>> {
  const documents = await store.forOrganization(organizationId).collection(kind).find({}, { projection: { name: 1 } });
  return new Set(documents.map((document) => String(document.name)));
}

/** References to providers and workflows that neither the file nor the organization has. */
async function referenceNotes(store: Store, organizationId: string, file: ResourceFile): Promise<string[]> {
  const apis = new Set([...(file.apis ?? []).map((api) => api.name), ...(await storedNames(store, organizationId, 'apis'))]);
  const workflows = new Set([...(file.workflows ?? []).map((workflow) => workflow.name), ...(await storedNames(store, organizationId, 'workflows'))]);
  const notes: string[] = [];
  for (const [index, workflow] of (file.workflows ?? []).entries()) {
    for (const [stepIndex, step] of (workflow.steps as Array<Record<string, unknown>>).entries()) {
      if (typeof step.api === 'string' && !apis.has(step.api)) notes.push(`workflows.${index}.steps.${stepIndex}: api "${step.api}" is not defined yet`);
      if (typeof step.workflow === 'string' && !workflows.has(step.workflow)) notes.push(`workflows.${index}.steps.${stepIndex}: workflow "${step.workflow}" is not stored (fine if it is registered in code)`);
    }
  }
  for (const [index, webhook] of (file.webhooks ?? []).entries()) {
    for (const [event, workflow] of Object.entries(webhook.workflows as Record<string, string>)) {
      if (!workflows.has(workflow)) notes.push(`webhooks.${index}.workflows.${event}: workflow "${workflow}" is not stored (fine if it is registered in code)`);
    }
  }
  return notes;
}

/**
 * Reads what is stored and decides, per resource, whether it is created, changed or unchanged; nothing is
 * written until `write()`. A resource replaces the stored one of its name (fields it leaves out are removed).
 * Stored secrets are compared opened (`secrets`); `store` seals the ones written (a `SealedStore`).
 */
export async function planApply(store: Store, organizationId: string, file: ResourceFile, now = new Date().toISOString(), secrets?: SecretOpener): Promise<ApplyPlan> {
  const writes: Array<() => Promise<unknown>> = [];
  const resources: AppliedResource[] = [];
  for (const kind of RESOURCE_KINDS) {
    for (const [index, resource] of (file[kind] ?? []).entries()) {
      if (kind === 'organizations') {
        resources.push(await planOrganization(store, resource as OrganizationResource, `${kind}.${index}`, writes, now));
        continue;
      }
      const collection = store.forOrganization(organizationId).collection<Document>(kind);
      const existing = await collection.findOne({ name: resource.name });
      if (!existing) {
        writes.push(() => collection.insertOne({ ...resource, createdAt: now, updatedAt: now }));
        resources.push({ kind, name: resource.name, outcome: 'created' });
        continue;
      }
      const fields = changedFields(resource, comparable(kind, existing, secrets));
      if (fields.length === 0) {
        resources.push({ kind, name: resource.name, outcome: 'unchanged' });
        continue;
      }
      writes.push(() => collection.updateOne({ _id: existing._id }, replacement(resource, existing, now)));
      resources.push({ kind, name: resource.name, outcome: 'changed', fields });
    }
  }
  const notes = await referenceNotes(store, organizationId, file);
  return {
    organizationId,
    resources,
    notes,
    write: async () => {
      for (const write of writes) await write();
    },
  };
}
