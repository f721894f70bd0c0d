import type { AuthorizedEnvelope } from '../auth/envelope.js';
import { ScopeError, StoreError } from '../db/errors.js';
import { isPlainObject } from '../db/validate.js';
import type { Collection, Filter, Store, Update } from '../db/types.js';
import { CLUSTERS, clusterRecords, SERVERS, type ClusterRecord, type Deployment } from '../inventory/records.js';
import { clusterOfIssuedKey } from '../inventory/servers.js';
import { MANAGER_COLLECTIONS, MANAGER_METHODS, type ManagerMethod } from './envelope.js';
import { MANAGER_ERRORS, clusterRefused } from './errors.js';
import type { ManagedFleet } from './fleet.js';
import type { ApiSend } from './provider-port.js';
import { isProviderRequest, sendProviderRequest } from './provider-request.js';

export const METHOD_PREFIX = 'manager.';

/** Fields a key bound to one cluster never writes: where a record belongs and what the parent keeps about it. */
const PROTECTED_FIELDS = ['_id', 'organization_id', 'cluster_id', 'manager', 'infrastructure', 'deployment', 'store', 'mesh'];

export interface ManagerCommandsDeps {
  /** The parent's store. */
  store: Store;
  fleet: Pick<ManagedFleet, 'createServer' | 'terminateServer' | 'statusPersisted'>;
  /** Disables a key the parent gave a server (its record was deleted). */
  revokeKey(keyId: string): Promise<void>;
  /** The `/api` path (SPEC 10.3) that provider requests take; without it they answer 503. */
  api?: ApiSend;
}

const touches = (path: string, field: string) => path === field || path.startsWith(`${field}.`);

/** The status an update writes into `master`, when it writes one. */
function statusWritten(update: Update): unknown {
  const set = update.$set;
  if (!isPlainObject(set)) return undefined;
  if (Object.hasOwn(set, 'master.status')) return set['master.status'];
  return isPlainObject(set.master) ? set.master.status : undefined;
}

function storeRefusal(error: unknown): unknown {
  if (error instanceof ScopeError) return MANAGER_ERRORS.protectedField(error.message);
  // A refusal of the envelope's content; the store's own failures (503, 500) are answered as such.
  if (error instanceof StoreError && error.statusCode < 500) return MANAGER_ERRORS.invalidEnvelope(error.message);
  return error;
}

/**
 * SPEC 13.3: the authorized envelopes of `/manager`, in the parent (platform) scope: the manager methods, and
 * provider requests passed to the API dispatcher (`provider-request.ts`). Only platform keys are served. A key the parent issued to a server it created is bound to that server's cluster: it reaches that
 * cluster's documents only, and any other cluster reads as unknown. Nothing here calls `state.save`, so
 * nothing written here is mirrored onward (SPEC 13.2).
 */
export class ManagerCommands {
  constructor(private readonly deps: ManagerCommandsDeps) {}

  async handle(envelope: AuthorizedEnvelope): Promise<Record<string, unknown>> {
    if (!envelope.user?.platform) throw MANAGER_ERRORS.forbidden('the manager serves keys of the platform organization only');
    const scope = this.deps.store.forOrganization(envelope.organization_id);
    if (isProviderRequest(envelope)) {
      if (!this.deps.api) throw MANAGER_ERRORS.unavailable('API providers are not available on this server');
      return sendProviderRequest(this.deps.api, envelope, await this.boundCluster(scope, envelope.user.key_id));
    }
    const method = envelope.method.startsWith(METHOD_PREFIX) ? envelope.method.slice(METHOD_PREFIX.length) : envelope.method;
    if (!(MANAGER_METHODS as readonly string[]).includes(method)) throw MANAGER_ERRORS.unknownMethod(method);
    const bound = await this.boundCluster(scope, envelope.user.key_id);
    try {
      switch (method as ManagerMethod) {
        case 'object.update':
          return await this.update(scope, envelope, bound);
        case 'object.delete':
          return await this.delete(scope, envelope, bound);
        case 'createServer': {
          const cluster = await this.cluster(scope, envelope, bound);
          const deployment = this.deployment(envelope, cluster);
          const serverId = envelope.server_id;
          return { ...(await this.deps.fleet.createServer({ cluster, deployment, ...(typeof serverId === 'string' ? { serverId } : {}) })) };
        }
        case 'terminateServer': {
          const cluster = await this.cluster(scope, envelope, bound);
          if (typeof envelope.server_id !== 'string') throw MANAGER_ERRORS.invalidEnvelope('server_id: is required');
          const deployment = envelope.deployment as Deployment | undefined;
          return { ...(await this.deps.fleet.terminateServer({ cluster, serverId: envelope.server_id, ...(deployment ? { deployment } : {}) })) };
        }
      }
    } catch (error) {
      throw storeRefusal(error);
    }
  }

  /**
   * The cluster of the server the key was issued to, or null for a key the operator made (any cluster). The
   * binding is read from the key, so it outlives the server's record; a server record naming the key binds it
   * too (keys issued before keys carried their cluster).
   */
  private async boundCluster(scope: ReturnType<Store['forOrganization']>, keyId: string): Promise<string | null> {
    const key = await scope.collection('keys').findOne({ _id: keyId }, { projection: { cluster_id: 1 } });
    if (typeof key?.cluster_id === 'string') return key.cluster_id;
    return clusterOfIssuedKey(scope, keyId);
  }

  private async cluster(scope: ReturnType<Store['forOrganization']>, envelope: AuthorizedEnvelope, bound: string | null): Promise<ClusterRecord> {
    const given = envelope.cluster;
    const id = typeof given === 'string' ? given : isPlainObject(given) && typeof given._id === 'string' ? given._id : undefined;
    if (!id) throw MANAGER_ERRORS.invalidEnvelope('cluster: is required (the cluster id)');
    if (bound !== null && bound !== id) throw clusterRefused();
    const cluster = await clusterRecords(scope).findOne({ _id: id });
    if (!cluster) throw clusterRefused();
    return cluster;
  }

  /** The requested cloud must be the API the key was authorized for, when the envelope names one. */
  private deployment(envelope: AuthorizedEnvelope, cluster: ClusterRecord): Deployment | undefined {
    const deployment = (envelope.deployment as Deployment | undefined) ?? cluster.initialDeployment;
    if (typeof envelope.api === 'string' && deployment && deployment.cloud !== envelope.api) {
      throw MANAGER_ERRORS.cloudMismatch('deployment.cloud:', deployment.cloud, String(envelope.api));
    }
    return envelope.deployment as Deployment | undefined;
  }

  private collection(scope: ReturnType<Store['forOrganization']>, envelope: AuthorizedEnvelope): { name: string; collection: Collection } {
    const name = envelope.collection;
    if (typeof name !== 'string' || !(MANAGER_COLLECTIONS as readonly string[]).includes(name)) {
      throw MANAGER_ERRORS.unknownCollection(String(name));
    }
    return { name, collection: scope.collection(name) };
  }

  /** A bound key's filter can only narrow to its own cluster's documents. */
  private boundFilter(name: string, filter: Filter, bound: string | null): Filter {
    if (bound === null) return filter;
    return { $and: [filter, name === SERVERS ? { cluster_id: bound } : { _id: bound }] };
  }

  private async update(scope: ReturnType<Store['forOrganization']>, envelope: AuthorizedEnvelope, bound: string | null): Promise<Record<string, unknown>> {
    const { name, collection } = this.collection(scope, envelope);
    const filter = envelope.filter;
    const update = envelope.update;
    if (!isPlainObject(filter)) throw MANAGER_ERRORS.invalidEnvelope('filter: is required, an object');
    if (!isPlainObject(update)) throw MANAGER_ERRORS.invalidEnvelope('update: is required, an object of operators');
    if (bound !== null) {
      for (const fields of Object.values(update)) {
        if (!isPlainObject(fields)) continue;
        const path = Object.keys(fields).find((field) => PROTECTED_FIELDS.some((protectedField) => touches(field, protectedField)));
        if (path) throw MANAGER_ERRORS.protectedField(`update: ${path} is kept by the manager`);
      }
    }
    const scoped = this.boundFilter(name, filter, bound);
    const status = name === SERVERS ? statusWritten(update as Update) : undefined;
    if (status === undefined) {
      const result = await collection.updateMany(scoped, update as Update);
      return { matchedCount: result.matchedCount, modifiedCount: result.modifiedCount };
    }
    // The watchdog and the cleanup hear of the servers whose status this update persisted, each by id.
    const ids = (await collection.find(scoped, { projection: { _id: 1 } })).map((record) => record._id);
    const result = ids.length ? await collection.updateMany({ _id: { $in: ids } }, update as Update) : { matchedCount: 0, modifiedCount: 0 };
    for (const id of ids) this.deps.fleet.statusPersisted(id, status);
    return { matchedCount: result.matchedCount, modifiedCount: result.modifiedCount };
  }

  private async delete(scope: ReturnType<Store['forOrganization']>, envelope: AuthorizedEnvelope, bound: string | null): Promise<Record<string, unknown>> {
    const { name, collection } = this.collection(scope, envelope);
    if (!isPlainObject(envelope.filter)) throw MANAGER_ERRORS.invalidEnvelope('filter: is required, an object');
    if (bound !== null && name === CLUSTERS) throw MANAGER_ERRORS.protectedField('clusters: a server\'s key cannot delete its cluster');
    const filter = this.boundFilter(name, envelope.filter, bound);
    if (name !== SERVERS) return { deletedCount: (await collection.deleteMany(filter)).deletedCount };
    // A server whose record goes is gone: the key the parent gave it goes with it.
    const records = await collection.find(filter, { projection: { _id: 1, manager: 1 } });
    if (records.length === 0) return { deletedCount: 0 };
    const result = await collection.deleteMany({ _id: { $in: records.map((record) => record._id) } });
    for (const record of records) {
      const keyId = isPlainObject(record.manager) ? record.manager.key_id : undefined;
      if (typeof keyId === 'string') await this.deps.revokeKey(keyId);
    }
    return { deletedCount: result.deletedCount };
  }
}
