import { FencedWriteRefused, type Fence } from '../db/fence.js';
import type { DeciderWrites } from '../inventory/decider-writes.js';
import { SERVERS } from '../inventory/records.js';
import { terminatingServers } from '../inventory/servers.js';
import type { RequestResult } from '../ipc/handlers.js';
import type { AutoscalerLog, ScaleActions } from './ports.js';
import { REMOVAL_METHOD } from './removal.js';

export interface ScaleActionDeps {
  cluster: string;
  /** The parent, when this cluster is managed: it makes and removes the servers (`createServer` / `terminateServer`). */
  manager: { readonly managed: boolean; send(envelope: Record<string, unknown>, options?: { signal?: AbortSignal }): Promise<unknown> };
  /** The provider path of an unmanaged cluster (`./provider-path.ts`). */
  provider: { create(fence: Fence): Promise<string>; terminate(serverId: string): Promise<void> };
  /** An envelope through this server's router (and the mesh), answered with every reply. */
  request(envelope: unknown, timeoutMs?: number): Promise<RequestResult>;
  /** The cluster's server records, as its decider writes them (fenced by the term of each decision). */
  records: DeciderWrites;
  /** How long a node's drain may take: its readiness grace, its connections' drain, and a margin. */
  drainTimeoutMs: number;
  log: AutoscalerLog;
}

/**
 * What the autoscaler does to its cluster (SPEC 14.4): scale out through the parent or the provider path; scale
 * in drain first (the node's own `drain`, over the mesh), then its record `terminating`, the provider's removal and
 * the node's graceful stop (`autoscaler.remove`); the sweep of `terminating` records, on the parent too. The
 * records' writes are fenced: one the store refuses throws `FencedWriteRefused`.
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
    claim: async (fence) => {
      if (!(await deps.records.claim(fence))) throw new FencedWriteRefused(fence, `the claim of cluster ${cluster}'s records`);
    },
    scaleOut: async (_reason, fence) => {
      if (manager.managed) await manager.send({ method: 'createServer', cluster });
      else log.info({ server: await provider.create(fence) }, 'autoscaler asked the provider for a new server');
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
    setStatus: async (target, status, fence) => {
      const outcome = await deps.records.setStatus(target, status, fence);
      if (outcome === 'refused') throw new FencedWriteRefused(fence, `marking ${target} ${status}`);
      if (outcome === 'written') log.info({ server: target, status, term: fence.term }, `autoscaler marked ${target} ${status}`);
    },
    claimServer: async (target, fence) => {
      if ((await deps.records.claimServer(target, fence)) === 'refused') throw new FencedWriteRefused(fence, `the claim of ${target}'s record before its removal`);
    },
    terminate: async (target, signal) => {
      if (manager.managed) await manager.send({ method: 'terminateServer', cluster, server_id: target }, signal ? { signal } : {});
      else await provider.terminate(target);
    },
    // The removed node's Fleetplane server stops gracefully; gone already (the provider stopped it), nobody answers.
    shutdown: async (target) => {
      if (await onMaster(target, REMOVAL_METHOD, { confirm: target })) log.info({ server: target }, `autoscaler stopped ${target}`);
    },
    sweep: async (fence) => {
      const { deleted, refused } = await deps.records.deleteTerminating(fence);
      if (refused) throw new FencedWriteRefused(fence, `the sweep of cluster ${cluster}'s terminating records`);
      // The parent's copies are in its own store, which knows nothing of this lease: asked only once this holder's
      // fenced delete went through. Left there by a failure, they go with the parent's own cleanup of a termination.
      if (manager.managed) await manager.send({ method: 'object.delete', collection: SERVERS, filter: terminatingServers(cluster) });
      return deleted;
    },
  };
}
