import type { ResolvedConfig } from '../config/schema.js';
import type { Store } from '../db/types.js';
import { NodeLifecycle } from '../lifecycle/node-lifecycle.js';
import type { LifecycleLog } from '../lifecycle/ports.js';
import type { RoutingDeps } from '../lifecycle/routing.js';
import { onFleetReady, type ReadinessSource } from '../lifecycle/startup-readiness.js';
import { saveInventorySection } from '../inventory/servers.js';
import { registerReservationControl } from '../repositories/control.js';
import type { SecretOpener } from '../secrets/keyring.js';
import type { Manager, UploadCompletion } from '../manager/manager.js';

export interface LifecycleBootDeps {
  config: ResolvedConfig;
  serverId: string;
  log: { child(bindings: Record<string, unknown>): LifecycleLog };
  db: Store;
  secrets: SecretOpener;
  platformOrganization(): Promise<string | null>;
  automation: { api: RoutingDeps['api']; workflow: RoutingDeps['workflows'] };
  events: Pick<ReadinessSource, 'on' | 'off'>;
  primary: {
    getFleetHealth(): { target: number; active: number };
    patchWorkerEnv(env: Record<string, string>): void;
    onShutdown(hook: (reason: string) => void | Promise<void>): void;
    onStopped(hook: () => void | Promise<void>): void;
  };
  handle(method: string, handler: (data: unknown) => unknown): void;
  /** SPEC 14.3: the parent hears of each recorded initial upload once, when this node is managed. */
  manager?: Pick<Manager, 'mirrorUploadCompletion'>;
}

/**
 * SPEC 14 in the primary's boot, after the store and automation and before the workers fork: identity, node
 * credential and checkouts now (workers inherit what they need through their environment); routing and the
 * initial upload at each fleet readiness; the routing removal first in every graceful stop; the upload abort
 * and the git checkpoints once the workers are gone, with the store still open (register this before the
 * store's close).
 */
export async function openNodeLifecycle(deps: LifecycleBootDeps): Promise<NodeLifecycle> {
  const { config, db, primary } = deps;
  const organizationId = (await deps.platformOrganization()) ?? undefined;
  const clusterId = config.server.cluster;
  const lifecycle = new NodeLifecycle({
    config, store: db, organizationId, serverId: deps.serverId, clusterId, secrets: deps.secrets,
    workflows: deps.automation.workflow, api: deps.automation.api, log: deps.log.child({ component: 'lifecycle' }),
    saveIdentity: async (identity) => void (await saveInventorySection(db, deps.serverId, clusterId, 'master', { ...identity }, organizationId)),
    ...(deps.manager ? { mirror: (patch: UploadCompletion) => deps.manager!.mirrorUploadCompletion(patch) } : {}),
  });
  const inherited = await lifecycle.start();
  if (Object.keys(inherited).length > 0) primary.patchWorkerEnv(inherited);
  registerReservationControl(deps.handle, { store: db, platformOrganization: deps.platformOrganization, clusterId });
  const stopListening = onFleetReady({ on: deps.events.on, off: deps.events.off, fleetHealth: () => primary.getFleetHealth() }, () => void lifecycle.ready());
  let stop: { reason: string; deadline: number } | undefined;
  primary.onShutdown(async (reason) => {
    stopListening();
    stop = { reason, deadline: Date.now() + config.shutdown.timeoutMs };
    await lifecycle.withdraw(reason, AbortSignal.timeout(config.shutdown.timeoutMs));
  });
  primary.onStopped(async () => {
    if (stop) await lifecycle.checkpoint(stop.reason, Math.max(0, stop.deadline - Date.now()));
  });
  return lifecycle;
}
