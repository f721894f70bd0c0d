import path from 'node:path';
import type { Test } from 'tap';
import { EmbeddedStore } from '../../src/db/embedded/store.js';
import { ensureStandardIndexes } from '../../src/db/open.js';
import { tempDir } from '../helpers/server-process.js';
import { dataDirWithTenants, type Tenant } from '../helpers/tenants.js';
import { until as waitUntil } from '../helpers/wait.js';

/** Polls `probe` every 100 ms until it answers a value; throws after a `budgetMs` budget (see helpers/wait.ts). */
export const until = <T>(what: string, probe: () => Promise<T | undefined> | T | undefined, budgetMs = 60_000): Promise<T> => waitUntil(what, probe, budgetMs, { everyMs: 100 });

export interface PlatformWithTenant {
  /** P's data directory: its store has the platform organization (first) and the tenant acme. */
  parentDir: string;
  parentDb: string;
  platform: Tenant;
  acme: Tenant;
  /** The acme cluster's own store, with no organization yet. */
  tenantDb: string;
  parentStore: EmbeddedStore;
  tenantStore: EmbeddedStore;
}

/** The stores of a platform server P and of one tenant cluster (acme), both closed after the test. */
export async function platformWithTenant(t: Test): Promise<PlatformWithTenant> {
  const { dataDir: parentDir, tenants } = await dataDirWithTenants([
    { name: 'platform', hosts: ['localhost', '127.0.0.1'] },
    { name: 'acme', hosts: ['acme.test'] },
  ]);
  const [platform, acme] = tenants as [Tenant, Tenant];
  const tenantDb = path.join(tempDir(), 'acme.db');
  const tenantStore = await EmbeddedStore.open(tenantDb);
  await ensureStandardIndexes(tenantStore);
  const parentDb = path.join(parentDir, 'fleetplane.db');
  const parentStore = await EmbeddedStore.open(parentDb);
  t.teardown(async () => {
    await tenantStore.close();
    await parentStore.close();
  });
  return { parentDir, parentDb, platform, acme, tenantDb, parentStore, tenantStore };
}
