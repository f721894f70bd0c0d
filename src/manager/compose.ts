import type { ResolvedConfig } from '../config/schema.js';
import type { Store } from '../db/types.js';
import type { Clock } from '../runtime/clock.js';
import { PlatformActivation } from './activation.js';
import { ManagerCommands } from './commands.js';
import { resolveConnection } from './connection.js';
import { ManagedFleet } from './fleet.js';
import { Manager } from './manager.js';
import type { ManagerLog } from './log.js';
import { providerPort, type ApiSend, type ProviderPort, type WorkflowRunner } from './provider-port.js';
import { platformServerKeys } from './server-keys.js';
import { TenantStores } from './tenant-stores.js';

export interface ManagerServicesDeps {
  serverId: string;
  config: ResolvedConfig;
  /** The server's store; without one the server is neither managed through its inventory nor a parent. */
  store?: Store;
  /** The platform organization (SPEC 8.4); null on a store without one: then this server manages no fleet. */
  platformOrganization: string | null;
  /** `server.api.send` (SPEC 10.3) with the built-in providers in front: the provider path's way out. */
  api: ApiSend;
  /** `server.api.send` as `POST /api` serves it: where `/manager` provider requests go (default: `api`). */
  apiHttp?: ApiSend;
  workflows?: WorkflowRunner;
  log: ManagerLog;
  clock: Clock;
  /** The managed connection the primary resolved, handed to workers at fork (no store lookup per worker). */
  connection?: { organization_id: string | null; host: string | null };
}

export interface ManagerServices {
  manager: Manager;
  /**
   * The provider path (SPEC 13.4): the platform's provider workflows, else the provider APIs. The parent's
   * fleet and an unmanaged cluster's autoscaler both ask it for servers.
   */
  provider: ProviderPort;
  fleet?: ManagedFleet;
  activation?: PlatformActivation;
  close(): Promise<void>;
}

/**
 * SPEC 13 for the composition root: `server.manager` with its connection, and on a server with a store and a
 * platform organization the parent side (fleet, commands, activation). Every process that
 * serves `/manager` has it: a confirmation or a report handled by another worker is seen through the persisted
 * status (the watchdog at its timeout), and the local provider finds a server started elsewhere by its
 * instance file.
 */
export async function createManagerServices(deps: ManagerServicesDeps): Promise<ManagerServices> {
  const { config, store, platformOrganization, log, clock } = deps;
  const connection = deps.connection ?? (await resolveConnection(config.manager, store, deps.serverId));
  const { api } = deps;
  const provider = providerPort({ api, workflows: deps.workflows, createWorkflow: config.manager.createWorkflow, terminateWorkflow: config.manager.terminateWorkflow });
  if (!store || !platformOrganization) {
    const manager = new Manager({ config: config.manager, connection, log });
    return { manager, provider, close: () => manager.close() };
  }
  const tenantStores = new TenantStores();
  const keys = platformServerKeys(store, platformOrganization);
  const fleet = new ManagedFleet({
    store,
    platformOrganization,
    parentHost: config.server.publicUrl ?? `http://127.0.0.1:${config.http.port}`,
    tenantStore: (cluster) => tenantStores.get(cluster),
    provider,
    keys,
    clock,
    log,
    startupTimeoutMs: config.manager.startupTimeoutMs,
    cleanupDelayMs: config.manager.cleanupDelayMs,
  });
  const commands = new ManagerCommands({ store, fleet, revokeKey: keys.revoke, api: deps.apiHttp ?? api });
  const manager = new Manager({ config: config.manager, connection, log, fleet, commands });
  const activation = config.manager.activation ? new PlatformActivation({ store, platformOrganization, createServer: (input) => fleet.createServer(input), log }) : undefined;
  return {
    manager,
    provider,
    fleet,
    activation,
    close: async () => {
      fleet.close();
      await manager.close();
      await tenantStores.close();
    },
  };
}
