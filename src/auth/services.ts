import { openStore, type StoreConfig } from '../db/open.js';
import type { Store } from '../db/types.js';
import { Authorizer, type AuthorizationLog } from './authorize.js';

export interface DataServices {
  db: Store;
  authorize: Authorizer;
}

/** The store of this process (embedded or MongoDB) and the authorizer over it: `server.db`, `server.authorize`. */
export async function openDataServices(config: StoreConfig & { server?: { organization?: string } }, log?: AuthorizationLog): Promise<DataServices> {
  const db = await openStore(config);
  return { db, authorize: new Authorizer(db, { log, platformOrganization: config.server?.organization }) };
}
