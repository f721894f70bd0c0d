import type { ResolvedConfig } from '../config/schema.js';
import type { Store } from '../db/types.js';
import { serverRecords, SERVERS, type ServerRecord } from '../inventory/records.js';
import type { SecretOpener, SecretPlace } from '../secrets/keyring.js';

/**
 * SPEC 13.1: the persisted fields of `server.manager`; a null organization means the server is unmanaged.
 * `apiKey` is the parent's key this server sends with. It travels to workers with the boot message, as the
 * config does, and is never logged: the `Manager` built from it keeps it non-enumerable.
 */
export interface ManagerConnection {
  organization_id: string | null;
  host: string | null;
  apiKey?: string;
}

export interface ConnectionDeps {
  config: ResolvedConfig['manager'];
  store: Store | undefined;
  serverId: string;
  /** Opens the key stored in the record; without it a stored key is not usable. */
  secrets?: SecretOpener;
  /** Told once when a manager is named but no usable key is at hand (its saves are then mirrored nowhere). */
  log?: { warn(details: Record<string, unknown>, message: string): void };
}

/** Where the key is stored: sealed for the record's organization, in the servers collection (SPEC 7.2). */
export const managerKeyPlace = (organizationId: string): SecretPlace => ({ organizationId, collection: SERVERS, path: ['manager', 'apiKey'] });

const text = (value: unknown): string | undefined => (typeof value === 'string' && value.length > 0 ? value : undefined);

/**
 * The parent this server reports to: `manager.organizationId`, `manager.host` and `manager.apiKey` from config,
 * else the fields recorded in this server's own inventory document (a provider may write them there before it
 * starts; `persistConnection` keeps the ones config gave). A stored key is used only for the parent it was
 * stored with, and only if it opens here.
 */
export async function resolveConnection(config: ResolvedConfig['manager'], store: Store | undefined, serverId: string, deps: Omit<ConnectionDeps, 'config' | 'store' | 'serverId'> = {}): Promise<ManagerConnection> {
  const configured = text(config.organizationId) && text(config.host) && text(config.apiKey);
  const record = configured || !store ? null : await serverRecords(store).findOne({ _id: serverId }, { projection: { organization_id: 1, manager: 1 } });
  const organization = text(config.organizationId) ?? text(record?.manager?.organization_id);
  const host = text(config.host) ?? text(record?.manager?.host);
  if (!organization || !host) return { organization_id: null, host: null };
  const connection: ManagerConnection = { organization_id: organization, host };
  const sameParent = record?.manager?.organization_id === organization && record?.manager?.host === host;
  const apiKey = text(config.apiKey) ?? (sameParent ? storedKey(record!, deps) : undefined);
  if (apiKey) connection.apiKey = apiKey;
  else {
    deps.log?.warn(
      { server: serverId, manager: host, stored: record?.manager?.apiKey !== undefined },
      'this server names a manager but holds no usable key for it (manager.apiKey, in config or sealed in its inventory record): nothing is mirrored to the manager',
    );
  }
  return connection;
}

function storedKey(record: ServerRecord, deps: Pick<ConnectionDeps, 'secrets'>): string | undefined {
  const stored = text(record.manager?.apiKey);
  const owner = text(record.organization_id);
  if (!stored || !owner || !deps.secrets) return undefined;
  try {
    return deps.secrets.open(stored, managerKeyPlace(owner));
  } catch {
    // Sealed with a key this server does not hold, or altered: the warning says no key is usable.
    return undefined;
  }
}

/**
 * Keeps the connection config gave in this server's record, the key sealed by the store (SPEC 13.1: persisted
 * fields, hydrated by the next start's read), so a restart without the config's key still reports to its
 * parent. Written only when it changed; a record without an owner organization keeps no key. Failures are the
 * caller's to log.
 */
export async function persistConnection(store: Store, serverId: string, owner: string | null, connection: ManagerConnection, secrets: SecretOpener): Promise<boolean> {
  if (!owner || !connection.organization_id || !connection.host || !connection.apiKey) return false;
  const servers = serverRecords(store);
  const record = await servers.findOne({ _id: serverId }, { projection: { organization_id: 1, manager: 1 } });
  if (record && record.organization_id === owner && record.manager?.organization_id === connection.organization_id && record.manager?.host === connection.host) {
    if (storedKey(record, { secrets }) === connection.apiKey) return false;
  }
  // The owner first (a record saved before owners were recorded has none): the key is sealed for it.
  await servers.updateOne({ _id: serverId }, { $set: { organization_id: owner } }, { upsert: true });
  await servers.updateOne(
    { _id: serverId, organization_id: owner },
    { $set: { 'manager.organization_id': connection.organization_id, 'manager.host': connection.host, 'manager.apiKey': connection.apiKey } },
  );
  return true;
}

/**
 * `https://<host>/manager` for a bare host name; an explicit `http://` or `https://` URL (tests, one host) keeps
 * its scheme and any base path.
 */
export function managerUrl(host: string): string {
  const base = /^https?:\/\//i.test(host) ? host : `https://${host}`;
  const url = new URL(base);
  if (url.username || url.password || url.search || url.hash) throw new Error('manager.host must not carry credentials, a query or a fragment');
  return `${url.origin}${url.pathname.replace(/\/+$/, '')}/manager`;
}
