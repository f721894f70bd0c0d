import type { ResolvedConfig } from '../config/schema.js';
import type { Store } from '../db/types.js';

/** SPEC 13.1: the persisted fields of `server.manager`; a null organization means the server is unmanaged. */
export interface ManagerConnection {
  organization_id: string | null;
  host: string | null;
}

type ServerRecord = { _id: string; manager?: { organization_id?: unknown; host?: unknown } };

/**
 * The parent this server reports to: `manager.organizationId` and `manager.host` from config, else the fields
 * recorded in this server's own inventory document (a provider may write them there before it starts).
 */
export async function resolveConnection(config: ResolvedConfig['manager'], store: Store | undefined, serverId: string): Promise<ManagerConnection> {
  if (config.organizationId && config.host) return { organization_id: config.organizationId, host: config.host };
  const record = store ? await store.collection<ServerRecord>('servers').findOne({ _id: serverId }, { projection: { manager: 1 } }) : null;
  const organization = config.organizationId ?? record?.manager?.organization_id;
  const host = config.host ?? record?.manager?.host;
  if (typeof organization !== 'string' || typeof host !== 'string' || !organization || !host) return { organization_id: null, host: null };
  return { organization_id: organization, host };
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
