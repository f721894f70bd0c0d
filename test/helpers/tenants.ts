import path from 'node:path';
import { createKey } from '../../src/auth/keys.js';
import { createOrganization } from '../../src/auth/organizations.js';
import { EmbeddedStore } from '../../src/db/embedded/store.js';
import { ensureStandardIndexes } from '../../src/db/open.js';
import { tempDir } from './server-process.js';

export interface Tenant {
  organization_id: string;
  host: string;
  adminKey: string;
}

/**
 * A data directory whose embedded store already has organizations (one per host) with an admin key each,
 * as `fleetplane init` / `apply` would leave it, for servers started by end-to-end tests.
 */
export async function dataDirWithTenants(hosts: Array<{ name: string; hosts: string[] }>): Promise<{ dataDir: string; tenants: Tenant[] }> {
  const dataDir = tempDir();
  const store = await EmbeddedStore.open(path.join(dataDir, 'fleetplane.db'));
  await ensureStandardIndexes(store);
  const tenants: Tenant[] = [];
  for (const entry of hosts) {
    const organization = await createOrganization(store, { name: entry.name, hosts: entry.hosts });
    const created = await createKey(store, { organizationId: organization._id, name: 'admin', admin: true });
    tenants.push({ organization_id: organization._id, host: entry.hosts[0]!, adminKey: created.key });
  }
  await store.close();
  return { dataDir, tenants };
}
