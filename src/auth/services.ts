import { openStore, type StoreConfig } from '../db/open.js';
import type { Store } from '../db/types.js';
import { Authorizer, type AuthorizationLog } from './authorize.js';
import type { FailureLimitSettings } from './failure-limit.js';

export interface DataServices {
  db: Store;
  authorize: Authorizer;
}

/** What the authorizer reads of the resolved config. */
export interface AuthorizationConfig {
  server?: { organization?: string };
  auth?: { failureLimit?: FailureLimitSettings };
  http?: { trustProxy?: readonly string[] };
}

/** The store of this process (embedded or MongoDB) and the authorizer over it: `server.db`, `server.authorize`. */
export async function openDataServices(config: StoreConfig & AuthorizationConfig, log?: AuthorizationLog): Promise<DataServices> {
  const db = await openStore(config);
  const authorize = new Authorizer(db, {
    log,
    platformOrganization: config.server?.organization,
    failureLimit: config.auth?.failureLimit,
    trustedProxies: config.http?.trustProxy,
  });
  return { db, authorize };
}
