import type { StoreConfig } from '../db/open.js';
import { openStoreWithRetry, type StoreOpenLog } from '../db/open-retry.js';
import type { Store } from '../db/types.js';
import { Authorizer, type AuthorizationLog } from './authorize.js';
import type { FailureLedger, FailureLimitSettings } from './failure-limit.js';

export interface DataServices {
  db: Store;
  authorize: Authorizer;
}

/** What the authorizer reads of the resolved config. */
export interface AuthorizationConfig {
  server?: { organization?: string };
  auth?: { failureLimit?: FailureLimitSettings; refusalFloorMs?: number };
  http?: { trustProxy?: readonly string[] };
}

/** The store of this process (embedded or MongoDB) and the authorizer over it: `server.db`, `server.authorize`. */
export async function openDataServices(
  config: StoreConfig & AuthorizationConfig,
  log?: AuthorizationLog & StoreOpenLog,
  options: { signal?: AbortSignal; failureLedger?: FailureLedger } = {},
): Promise<DataServices> {
  // A store that cannot be reached yet (MongoDB starting with the host) is retried with backoff, one log line
  // per attempt; a misconfigured one fails at once.
  const db = await openStoreWithRetry(config, log ?? SILENT, { signal: options.signal });
  const authorize = new Authorizer(db, {
    log,
    platformOrganization: config.server?.organization,
    failureLimit: config.auth?.failureLimit,
    refusalFloorMs: config.auth?.refusalFloorMs,
    failureLedger: options.failureLedger,
    trustedProxies: config.http?.trustProxy,
  });
  return { db, authorize };
}

const SILENT: StoreOpenLog = { warn: () => {} };
