import { createOrganization } from '../../src/auth/organizations.js';
import { platformServerKeys } from '../../src/manager/server-keys.js';
import { ManagedFleet } from '../../src/manager/fleet.js';
import type { ClusterRecord } from '../../src/inventory/records.js';
import type { ProviderPort, ProviderRequest } from '../../src/manager/provider-port.js';
import { FakeClock } from '../helpers/fake-clock.js';
import { testStore } from '../auth/fixtures/tenants.js';

export type Line = { level: string; details: Record<string, unknown>; message: string };

export function logger() {
  const lines: Line[] = [];
  const at = (level: string) => (details: Record<string, unknown>, message: string) => void lines.push({ level, details, message });
  return { lines, log: { info: at('info'), warn: at('warn'), error: at('error') } };
}

/** A provider stand-in that records each request and answers with `answer`. */
export function stubProvider(answer: (action: 'create' | 'terminate', request: ProviderRequest) => Promise<unknown> = async () => ({ instanceId: 'i-1' })) {
  const calls: Array<{ action: 'create' | 'terminate'; request: ProviderRequest }> = [];
  const port: ProviderPort = {
    create: async (request) => {
      calls.push({ action: 'create', request });
      return answer('create', request);
    },
    terminate: async (request) => {
      calls.push({ action: 'terminate', request });
      return answer('terminate', request);
    },
  };
  return { calls, port };
}

/**
 * A parent store with a platform and a tenant organization, a tenant store of its own, and a managed cluster
 * of the tenant, with a fleet over them driven by a fake clock.
 */
export async function fleetSetup(provider = stubProvider()) {
  const store = await testStore();
  const tenantStore = await testStore();
  const platform = (await createOrganization(store, { name: 'platform', hosts: ['platform.test'] }))._id;
  const tenant = (await createOrganization(store, { name: 'tenant', hosts: ['tenant.test'] }))._id;
  const cluster: ClusterRecord = {
    _id: 'c1',
    organization_id: platform,
    name: 'tenant cluster',
    manager: { organization_id: platform, host: 'http://127.0.0.1:1', for: tenant },
    initialDeployment: { cloud: 'local', workers: 1 },
    mesh: { secret: 'a-mesh-secret-of-the-tenant-cluster' },
  };
  await store.forOrganization(platform).collection('clusters').insertOne(cluster);
  const clock = new FakeClock(Date.parse('2026-01-01T00:00:00Z'));
  const { lines, log } = logger();
  const keys = platformServerKeys(store, platform);
  const fleet = new ManagedFleet({
    store,
    platformOrganization: platform,
    parentHost: 'http://127.0.0.1:1',
    tenantStore: async () => tenantStore,
    provider: provider.port,
    keys,
    clock,
    log,
    startupTimeoutMs: 120_000,
    cleanupDelayMs: 60_000,
  });
  const close = async () => {
    fleet.close();
    await store.close();
    await tenantStore.close();
  };
  return { store, tenantStore, platform, tenant, cluster, clock, lines, fleet, provider, keys, close };
}
