import type { Collection } from '../db/types.js';
import { SERVERS, type ServerRecord } from '../inventory/records.js';
import { terminatingServers } from '../inventory/servers.js';
import type { RequestResult } from '../ipc/handlers.js';
import type { AutoscalerLog, ScaleActions } from './ports.js';
import { REMOVAL_METHOD } from './removal.js';

export interface ScaleActionDeps {
  cluster: string;
  /** The parent, when this cluster is managed: it makes and removes the servers (`createServer` / `terminateServer`). */
  manager: { readonly managed: boolean; send(envelope: Record<string, unknown>, options?: { signal?: AbortSignal }): Promise<unknown> };
  /** The provider path of an unmanaged cluster (`./provider-path.ts`). */
  provider: { create(): Promise<string>; terminate(serverId: string): Promise<void> };
  /** An envelope through this server's router (and the mesh), answered with every reply. */
  request(envelope: unknown, timeoutMs?: number): Promise<RequestResult>;
  servers(): Collection<ServerRecord>;
  /** How long a node's drain may take: its readiness grace, its connections' drain, and a margin. */
  drainTimeoutMs: number;
  log: AutoscalerLog;
}

/**
 * What the autoscaler does to its cluster (SPEC 14.4): scale out through the parent or the provider path; scale
 * in drain first (the node's own `drain`, over the mesh), then its record `terminating`, the provider's removal and
 * the node's graceful stop (`autoscaler.remove`); the sweep of `terminating` records, on the parent too.
 */
export function scaleActions(deps: ScaleActionDeps): ScaleActions {
  const { cluster, manager, provider, log } = deps;
  /** True when `target`'s primary answered; its refusal is thrown. */
  const onMaster = async (target: string, method: string, extra: Record<string, unknown> = {}, timeoutMs?: number) => {
    const result = await deps.request({ method, server: target, master: true, ...extra }, timeoutMs);
    const reply = result.replies.find((candidate) => candidate.server === target);
    if (reply && !reply.ok) throw new Error(`${method} on ${target}: ${reply.error?.code}: ${reply.error?.message}`);
    return reply !== undefined;
  };
  return {
    scaleOut: async () => {
      if (manager.managed) await manager.send({ method: 'createServer', cluster });
      else log.info({ server: await provider.create() }, 'autoscaler asked the provider for a new server');
    },
    drain: async (target) => {
      // Answered once drained (`wait`): after the readiness grace and the connections' drain, as the node's own
      // state resolves; a drain only accepted could be followed by the provider's removal during the grace.
      if (await onMaster(target, 'drain', { data: { value: true, wait: true } }, deps.drainTimeoutMs)) {
        log.info({ server: target }, `autoscaler drained ${target}`);
        return true;
      }
      // No answer: the node is gone, or too slow; a slow one is taken back into service rather than left drained.
      void onMaster(target, 'drain', { data: false }).catch(() => undefined);
      return false;
    },
    undrain: async (target) => {
      if (await onMaster(target, 'drain', { data: false })) log.info({ server: target }, `autoscaler took ${target} back into service`);
      else log.warn({ server: target }, `autoscaler could not take ${target} back into service: it did not answer`);
    },
    setStatus: async (target, status) => {
      await deps.servers().updateOne({ _id: target, cluster_id: cluster }, { $set: { 'master.status': status } });
      log.info({ server: target, status }, `autoscaler marked ${target} ${status}`);
    },
    terminate: async (target, signal) => {
      if (manager.managed) await manager.send({ method: 'terminateServer', cluster, server_id: target }, signal ? { signal } : {});
      else await provider.terminate(target);
    },
    // The removed node's Fleetplane server stops gracefully; gone already (the provider stopped it), nobody answers.
    shutdown: async (target) => {
      if (await onMaster(target, REMOVAL_METHOD, { confirm: target })) log.info({ server: target }, `autoscaler stopped ${target}`);
    },
    sweep: async () => {
      const filter = terminatingServers(cluster);
      if (manager.managed) await manager.send({ method: 'object.delete', collection: SERVERS, filter });
      return (await deps.servers().deleteMany(filter)).deletedCount;
    },
  };
}
