import type { ResolvedConfig } from '../config/schema.js';
import type { Store } from '../db/types.js';
import type { Logger } from '../logging/logger.js';
import { saveInventorySection } from '../mesh/inventory.js';
import { registerReservationControl } from '../repositories/control.js';
import type { SecretOpener } from '../secrets/keyring.js';
import { NodeLifecycle } from './node-lifecycle.js';
import type { RoutingDeps } from './routing.js';
import { onFleetReady } from './startup-readiness.js';

/** What the node lifecycle uses of the primary's server object (structural: no dependency on the facade). */
export interface LifecycleHost {
  readonly id: string;
  readonly db: Store;
  readonly secrets?: SecretOpener;
  readonly api: RoutingDeps['api'];
  readonly workflow: RoutingDeps['workflows'];
  readonly authorize?: { directory: { platformOrganization(): Promise<string | null> } };
  readonly primaryRuntime?: { getFleetHealth(): { target: number; active: number } };
  on(event: 'worker:ready' | 'status_change', listener: () => void): unknown;
  off(event: 'worker:ready' | 'status_change', listener: () => void): unknown;
  onShutdown(hook: (reason: string) => void | Promise<void>): void;
  patchWorkerEnv(env: Record<string, string>): void;
  handle(method: string, handler: (data: unknown) => unknown): void;
}

/**
 * SPEC 14 attached to a primary through its plugin surface: `install` runs after the store and automation are
 * up and before workers fork, which is where identity, credential and checkouts belong; the shutdown hook runs
 * before workers stop (routing removal); `uninstall` runs once they are gone, with the store still open
 * (upload abort, git checkpoints).
 */
export function nodeLifecyclePlugin() {
  let lifecycle: NodeLifecycle | undefined;
  let stopListening: (() => void) | undefined;
  let stop: { reason: string; deadline: number } | undefined;
  return {
    name: 'node-lifecycle',
    async install(server: LifecycleHost, log: Logger, config: ResolvedConfig): Promise<void> {
      const organizationId = (await server.authorize?.directory.platformOrganization()) ?? undefined;
      const clusterId = config.server.cluster;
      const current = new NodeLifecycle({
        config, store: server.db, organizationId, serverId: server.id, clusterId, secrets: server.secrets,
        workflows: server.workflow, api: server.api, log: log.child({ component: 'lifecycle' }),
        saveIdentity: async (identity) => void (await saveInventorySection(server.db, server.id, clusterId, 'master', { ...identity }, organizationId)),
      });
      lifecycle = current;
      const inherited = await current.start();
      if (Object.keys(inherited).length > 0) server.patchWorkerEnv(inherited);
      if (organizationId) registerReservationControl((method, handler) => server.handle(method, handler), { store: server.db, organizationId, clusterId });
      const fleet = server.primaryRuntime;
      if (fleet) stopListening = onFleetReady({ on: server.on.bind(server), off: server.off.bind(server), fleetHealth: () => fleet.getFleetHealth() }, () => void current.ready());
      server.onShutdown(async (reason) => {
        stop = { reason, deadline: Date.now() + config.shutdown.timeoutMs };
        await current.withdraw(reason, AbortSignal.timeout(config.shutdown.timeoutMs));
      });
    },
    async uninstall(): Promise<void> {
      stopListening?.();
      if (lifecycle && stop) await lifecycle.checkpoint(stop.reason, Math.max(0, stop.deadline - Date.now()));
    },
  };
}
