import type { ScalePolicy } from './policy.js';

/** One measurement of one server: CPU and memory in percent of what its host gives it, averaged over its processes. */
export interface Sample {
  at: number;
  cpu: number;
  memory: number;
}

/** A server of the cluster as the inventory knows it. */
export interface ClusterNode {
  id: string;
  /**
   * `pending`: created, its confirmation not yet persisted (it counts toward the size: no double scale-out).
   * `failed`: the provider refused its termination; it still serves, so it counts toward the size, and it is
   * never picked again (people decide what becomes of it). `terminating` and `stopped` no longer count.
   */
  status: 'pending' | 'running' | 'terminating' | 'failed' | 'stopped';
  createdAt: number;
  /** When the server's workers first served, as it recorded itself (undefined: unknown). */
  servingSince?: number;
}

export interface DecisionInput {
  policy: ScalePolicy;
  nodes: readonly ClusterNode[];
  /** Samples per server id, any order; only those inside the policy's window are used. */
  signals: ReadonlyMap<string, readonly Sample[]>;
  now: number;
  /** When the last action was taken (undefined: never). */
  lastActionAt?: number;
  /**
   * The server that decides (and carries the action out). It is never picked for scale-in, except when it is
   * the cluster's last server: then nobody else could.
   */
  deciding?: string;
  /**
   * A confirmed `organization.inactive` of the cluster's own organization, seen by the deciding server: the
   * only way to the last server, and only when the deciding server is that last server (the organization is
   * then inactive on the whole cluster).
   */
  organizationInactive?: boolean;
}

export type ScaleReason = 'below-min' | 'above-max' | 'cpu' | 'memory' | 'idle' | 'organization-inactive';

export type Decision =
  | { action: 'none'; reason: string; current: number; desired: number }
  | { action: 'scale-out'; reason: ScaleReason; current: number; desired: number }
  | { action: 'scale-in'; reason: ScaleReason; current: number; desired: number; serverId: string };

interface Load {
  node: ClusterNode;
  cpu: number;
  memory: number;
}

/**
 * The autoscaler's decision, a pure function of the signals, the inventory, the policy and the clock.
 *
 * - At most one action per cooldown, and none while the cluster is paused (the policy's `paused`). The cooldown
 *   also runs from when the newest running server began to serve: a server may take longer to start than a
 *   cooldown lasts, and the window's samples from before it served would grow the cluster again for one load.
 * - Never below `minClusterSize` nor above `maxClusterSize`; a server created but not yet confirmed counts, and
 *   so does a `failed` one (it still serves).
 * - No scale-out from partial data: every running server must have samples in the window.
 * - A scale-in removes a running server with signals other than the deciding one, and only when the rest can
 *   absorb its load without crossing a scale-out threshold (so the next evaluation does not grow it back).
 * - CPU and memory alone never remove the last server; a confirmed inactive organization with
 *   `minClusterSize: 0` does, when the deciding server is that last server.
 */
export function decide(input: DecisionInput): Decision {
  const { policy, now } = input;
  // A failed server counts: the provider refused to remove it, so it still runs and serves. Leaving it out
  // would let a below-min scale-out replace a server that is still there, and grow past max on every refusal.
  const counted = input.nodes.filter((node) => node.status === 'running' || node.status === 'pending' || node.status === 'failed');
  const running = counted.filter((node) => node.status === 'running');
  const current = counted.length;
  const none = (reason: string, desired = current): Decision => ({ action: 'none', reason, current, desired });
  if (policy.paused) return none('paused');
  let settling = input.lastActionAt ?? Number.NEGATIVE_INFINITY;
  for (const node of running) if (node.servingSince !== undefined && node.servingSince > settling) settling = node.servingSince;
  if (now - settling < policy.cooldownMs) return none('cooldown');

  if (current < policy.minClusterSize) return { action: 'scale-out', reason: 'below-min', current, desired: current + 1 };
  // Running and failed servers with samples in the window (a failed one still serves: its load is the cluster's).
  const loads = measure(counted, input.signals, now - policy.windowMs);
  // Only a running server other than the deciding one is removed by an ordinary scale-in.
  const candidates = loads.filter((load) => load.node.status === 'running' && load.node.id !== input.deciding);
  if (current > policy.maxClusterSize) return scaleIn(candidates, policy, 'above-max', current) ?? none('no server to remove has signals', current - 1);

  const last = current === 1 && running.length === 1 && running[0]!.id === input.deciding;
  if (input.organizationInactive && policy.minClusterSize === 0 && last) {
    return scaleIn(loads, policy, 'organization-inactive', current) ?? none('no server to remove has signals', 0);
  }
  if (counted.some((node) => node.status === 'pending')) return none('a new server is not confirmed yet');
  if (running.length === 0) return none('no running server');

  let measuredRunning = 0;
  for (const load of loads) if (load.node.status === 'running') measuredRunning++;
  const complete = measuredRunning === running.length;
  const cpu = mean(loads.map((load) => load.cpu));
  const memory = mean(loads.map((load) => load.memory));
  const hot = cpu > policy.cpu.scaleOutAbove ? 'cpu' : memory > policy.memory.scaleOutAbove ? 'memory' : undefined;
  if (hot) {
    if (!complete) return none('signals missing from a server');
    if (current >= policy.maxClusterSize) return none('at maxClusterSize');
    return { action: 'scale-out', reason: hot, current, desired: current + 1 };
  }
  if (loads.length === 0) return none('no signals');
  const idle = cpu < policy.cpu.scaleInBelow && memory < policy.memory.scaleInBelow;
  if (!idle) return none('inside the thresholds');
  if (current <= Math.max(policy.minClusterSize, 1)) return none(current <= policy.minClusterSize ? 'at minClusterSize' : 'the last server stays');
  // The remaining servers take the load of the removed one: it must stay under the scale-out thresholds.
  const spread = current / (current - 1);
  if (cpu * spread > policy.cpu.scaleOutAbove || memory * spread > policy.memory.scaleOutAbove) {
    return none('the remaining servers could not absorb the load');
  }
  return scaleIn(candidates, policy, 'idle', current) ?? none('no server to remove has signals');
}

function scaleIn(loads: Load[], policy: ScalePolicy, reason: ScaleReason, current: number): Decision | undefined {
  if (loads.length === 0) return undefined;
  const pick = loads.reduce((best, load) => (better(load, best, policy) ? load : best));
  return { action: 'scale-in', reason, current, desired: current - 1, serverId: pick.node.id };
}

/** `newest`: the most recently created (ties: the larger id); `least-loaded`: the lowest CPU, then memory. */
function better(candidate: Load, best: Load, policy: ScalePolicy): boolean {
  if (policy.decommissionStrategy === 'least-loaded') {
    if (candidate.cpu !== best.cpu) return candidate.cpu < best.cpu;
    if (candidate.memory !== best.memory) return candidate.memory < best.memory;
  }
  if (candidate.node.createdAt !== best.node.createdAt) return candidate.node.createdAt > best.node.createdAt;
  return candidate.node.id > best.node.id;
}

/** Each running or failed server's mean CPU and memory over the window; servers without a sample in it are left out. */
function measure(nodes: readonly ClusterNode[], signals: ReadonlyMap<string, readonly Sample[]>, since: number): Load[] {
  const loads: Load[] = [];
  for (const node of nodes) {
    if (node.status !== 'running' && node.status !== 'failed') continue;
    let cpu = 0;
    let memory = 0;
    let count = 0;
    for (const sample of signals.get(node.id) ?? []) {
      if (sample.at < since || !Number.isFinite(sample.cpu) || !Number.isFinite(sample.memory)) continue;
      cpu += sample.cpu;
      memory += sample.memory;
      count++;
    }
    if (count > 0) loads.push({ node, cpu: cpu / count, memory: memory / count });
  }
  return loads;
}

function mean(values: number[]): number {
  let sum = 0;
  for (const value of values) sum += value;
  return values.length ? sum / values.length : 0;
}
