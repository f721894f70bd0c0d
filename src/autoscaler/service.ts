import { FencedWriteRefused, type Fence } from '../db/fence.js';
import type { LeaseLoss } from '../db/lease.js';
import { ActionBackoff, WarningGate } from './backoff.js';
import { decide, type Decision, type Sample } from './decide.js';
import { parsePolicy, PolicyError, POLICY_DEFAULTS, type ScalePolicy } from './policy.js';
import type { ActionRecord, AutoscalerDeps, AutoscalerStatus } from './ports.js';
import { Cancelled, ScaleIn } from './scale-in.js';

export type { ActionRecord, AutoscalerDeps, AutoscalerLog, AutoscalerMetrics, AutoscalerStatus, DeciderLease, InventoryReader, Outcome, ScaleActions } from './ports.js';

/** Samples kept: enough for the longest window at one sample per second, bounded either way. */
const MAX_SAMPLES = 3_600;

const LOSSES: Record<LeaseLoss, string> = {
  taken: 'another server decides for the cluster',
  refused: 'the store refused a write of its term, another server decides for the cluster',
  expired: 'it ran out before a renewal reached the store (this server stopped deciding)',
};

/**
 * SPEC 14.4: every `intervalMs`, samples this server and, on the cluster's deciding server only, gathers the
 * peers' samples, decides and runs the action. The deciding server is the holder of the cluster's decider lease
 * (a document in the store, `src/db/lease.ts`), whatever the mesh sees: two servers that cannot reach each other
 * still share the store, and only one of them holds the lease. Before each action the holder records it in the
 * lease (a fenced write): a holder that lost the lease does not act, and the next holder reads when the last
 * action was, so the cooldown holds across hand-overs. Actions run one at a time, beside the sampling; a
 * scale-in is drain-first and commits `terminating` before the provider request, so a crash in between leaves a
 * record the sweep removes rather than a serving node nobody knows about.
 *
 * Every write an action makes carries the term it was decided in, and a new term begins by claiming the
 * cluster's records (`ScaleActions.claim`): a holder that believes it still holds a lease taken over (paused, cut
 * from the store, its clock behind by more than the skew assumed) has its writes refused by the store, and stops.
 */
export class Autoscaler {
  private samples: Sample[] = [];
  private stopped = true;
  private evaluations = 0;
  private deciding = false;
  /** This server's own record says it is a confirmed running server: only such a server takes the lease. */
  private eligible = false;
  private policy: ScalePolicy | undefined;
  private lastDecision: Decision | undefined;
  private lastAction: ActionRecord | undefined;
  private acting: Promise<void> | undefined;
  /** The scale-in under way, if any. */
  private scaleIn: ScaleIn | undefined;
  /** The term whose claim of the cluster's records went through: this server decides in it. */
  private claimedTerm: number | undefined;
  private cancelTick: (() => void) | undefined;
  private cancelSweep: (() => void) | undefined;
  private stopKeeping: (() => void) | undefined;
  private readonly backoff = new ActionBackoff();
  private readonly warnings = new WarningGate();

  constructor(private readonly deps: AutoscalerDeps) {
    deps.lease.onLost((loss) => {
      this.deciding = false;
      // An action still before its provider request stops at once; one past it runs to its end.
      this.scaleIn?.cancel();
      deps.log.info({ loss }, `autoscaler lost the decider lease: ${LOSSES[loss]}`);
    });
  }

  start(): void {
    if (!this.stopped) return;
    this.stopped = false;
    this.scheduleTick();
    this.scheduleSweep();
    // Renewed on its own timer, so an evaluation waiting on its peers never lets the lease run out.
    this.stopKeeping = this.deps.lease.keep({
      eligible: () => !this.stopped && (this.eligible || this.acting !== undefined),
      onError: (error) => this.warn(`lease: ${(error as Error).message}`, { err: error }, `autoscaler could not take or renew the decider lease: ${(error as Error).message}`),
    });
  }

  /**
   * Stops the timers; an action still before its provider request is cancelled, one past it is waited for.
   * Except when this server asked its provider to remove it: the provider is what stops it, and may answer only
   * once this process has exited, so the request is given up rather than waited for until it times out.
   * The lease is given up last: another server decides from then on without waiting for its expiry.
   */
  async stop(): Promise<void> {
    this.stopped = true;
    this.cancelTick?.();
    this.cancelSweep?.();
    this.stopKeeping?.();
    this.scaleIn?.cancel();
    if (!this.scaleIn?.abandonSelfRemoval()) await this.acting;
    this.deciding = false;
    await this.deps.lease.release().catch((error: unknown) => this.deps.log.warn({ err: error }, `autoscaler could not release the decider lease: ${(error as Error).message}`));
  }

  /** Pauses the cluster: written to its document, so it holds whichever server decides, and across restarts. */
  async pause(): Promise<AutoscalerStatus> {
    await this.deps.inventory.setPaused(true);
    this.deps.log.info({}, 'autoscaler paused for the cluster');
    return this.status();
  }

  async resume(): Promise<AutoscalerStatus> {
    await this.deps.inventory.setPaused(false);
    this.deps.log.info({}, 'autoscaler resumed for the cluster');
    return this.status();
  }

  /** This server's view, with the policy and the lease read now (a server that does not decide never reads them otherwise). */
  async status(): Promise<AutoscalerStatus> {
    const [policy, lease] = await Promise.all([this.readPolicy(), this.deps.lease.read()]);
    return {
      serverId: this.deps.serverId,
      paused: policy?.paused ?? false,
      deciding: this.deciding && this.deps.lease.held(),
      lease: lease ? { owner: lease.owner, term: lease.term, expiresAt: new Date(lease.expiresAt).toISOString() } : null,
      ...(policy ? { policy } : {}),
      ...(this.lastDecision ? { lastDecision: this.lastDecision } : {}),
      ...(this.lastAction ? { lastAction: { ...this.lastAction } } : {}),
      samples: this.samples.length,
      evaluations: this.evaluations,
    };
  }

  /** The answer to `autoscaler.signals`: this server's samples, oldest first. */
  signals(): Sample[] {
    return [...this.samples];
  }

  /** One evaluation: sample, then decide and act when this server holds the cluster's decider lease. */
  async tick(): Promise<void> {
    const sample = this.deps.sample();
    if (sample) {
      this.samples.push(sample);
      if (this.samples.length > MAX_SAMPLES) this.samples.splice(0, this.samples.length - MAX_SAMPLES);
    }
    let nodes = await this.deps.inventory.nodes();
    this.eligible = nodes.some((node) => node.id === this.deps.serverId && node.status === 'running');
    this.deciding = await this.holdLease();
    if (!this.deciding) return;
    const fence = this.deps.lease.fence();
    if (!fence) return void (this.deciding = false);
    if (this.claimedTerm !== fence.term) {
      // A new term's first step: from the claim on, no write of an earlier holder lands on the cluster's records,
      // and what this holder reads next is the inventory as it is after every write that did.
      if (!(await this.claim(fence))) return;
      nodes = await this.deps.inventory.nodes();
    }
    const policy = await this.readPolicy();
    if (!policy) return;
    this.dropOlderThan(this.deps.clock.now() - policy.windowMs);
    if (this.acting) return;
    // A failed server still serves: its load is part of the cluster's when it answers.
    const peers = nodes.filter((node) => (node.status === 'running' || node.status === 'failed') && node.id !== this.deps.serverId).map((node) => node.id);
    const signals = peers.length > 0 ? await this.deps.gather(peers) : new Map<string, Sample[]>();
    signals.set(this.deps.serverId, this.signals());
    const now = this.deps.clock.now();
    const lastActionAt = this.lastActionAt();
    let decision = decide({
      policy,
      nodes,
      signals,
      now,
      deciding: this.deps.serverId,
      organizationInactive: this.deps.inventory.organizationInactive?.() ?? false,
      ...(lastActionAt !== undefined ? { lastActionAt } : {}),
    });
    const retryAt = decision.action === 'none' ? undefined : this.backoff.retryAt(decision.action, policy.cooldownMs);
    if (decision.action !== 'none' && retryAt !== undefined && now < retryAt) {
      decision = { action: 'none', reason: `backing off after ${this.backoff.count(decision.action)} failed ${decision.action} attempts`, current: decision.current, desired: decision.desired };
    }
    this.evaluations++;
    this.lastDecision = decision;
    this.deps.metrics?.size(decision.current, decision.desired);
    if (decision.action === 'none') return;
    const record: ActionRecord = { action: decision.action, reason: decision.reason, at: now, ...(decision.action === 'scale-in' ? { serverId: decision.serverId } : {}) };
    // The fenced write: only a server still holding the lease acts, and the next holder knows of this action.
    const recorded = await this.deps.lease.record({ lastActionAt: now, lastAction: { ...record, by: this.deps.serverId, term: fence.term } });
    if (!recorded || this.deps.lease.fence()?.term !== fence.term) {
      this.deciding = false;
      this.deps.log.info({ decision }, `autoscaler did not ${decision.action}: it no longer holds the decider lease`);
      return;
    }
    this.deps.log.info({ decision }, `autoscaler decided ${decision.action} (${decision.reason})`);
    this.deps.metrics?.action(decision.action, decision.reason);
    this.lastAction = record;
    this.acting = this.act(record, decision, fence).finally(() => {
      this.acting = undefined;
      this.scaleIn = undefined;
    });
  }

  /** Resolves when the running action, if any, has ended. */
  async settled(): Promise<void> {
    await this.acting;
  }

  /** Takes or keeps the lease when this server may decide; gives it up when its own record says it may not. */
  private async holdLease(): Promise<boolean> {
    const { lease } = this.deps;
    if (!this.eligible) {
      if (lease.held() && !this.acting) await lease.release();
      return false;
    }
    return lease.held() || lease.acquire();
  }

  /** The later of this server's last action and the one the lease records (another holder's, before a hand-over). */
  private lastActionAt(): number | undefined {
    const recorded = this.deps.lease.data().lastActionAt;
    const candidates = [this.lastAction?.at, typeof recorded === 'number' && Number.isFinite(recorded) ? recorded : undefined].filter((at): at is number => at !== undefined);
    return candidates.length > 0 ? Math.max(...candidates) : undefined;
  }

  /** Stamps this term on the cluster's records; false (and this server stops deciding) when refused. */
  private async claim(fence: Fence): Promise<boolean> {
    try {
      await this.deps.actions.claim(fence);
    } catch (error) {
      if (!(error instanceof FencedWriteRefused)) throw error;
      this.fencedOut(error);
      return false;
    }
    this.claimedTerm = fence.term;
    this.deps.log.info({ term: fence.term }, `autoscaler decides for the cluster in term ${fence.term}`);
    return true;
  }

  /** A write of this server's term was refused: a later holder wrote there, so this one stops deciding at once. */
  private fencedOut(error: FencedWriteRefused): void {
    this.deciding = false;
    this.deps.log.warn({ term: error.fence.term, err: error }, `autoscaler stopped: ${error.message}`);
    this.deps.lease.refused(error.fence);
  }

  private async act(record: ActionRecord, decision: Exclude<Decision, { action: 'none' }>, fence: Fence): Promise<void> {
    try {
      if (decision.action === 'scale-out') await this.deps.actions.scaleOut(decision.reason, fence);
      else {
        const { serverId, actions, clock, removalNoticeMs = 0, log } = this.deps;
        this.scaleIn = new ScaleIn({ serverId, actions, clock, removalNoticeMs, log }, decision.serverId, fence);
        await this.scaleIn.run(() => this.stopped);
      }
      record.outcome = 'done';
      this.backoff.succeeded(record.action);
      this.deps.log.info({ action: record }, `autoscaler ${record.action} done`);
    } catch (error) {
      record.outcome = error instanceof Cancelled ? 'cancelled' : error instanceof FencedWriteRefused ? 'refused' : 'failed';
      record.error = (error as Error).message;
      if (error instanceof FencedWriteRefused) return this.fencedOut(error);
      if (record.outcome === 'failed') this.backoff.failed(record.action, record.at);
      const retryAt = this.backoff.retryAt(record.action, this.policy?.cooldownMs ?? POLICY_DEFAULTS.cooldownMs);
      const fields = { action: record, err: error, ...(record.outcome === 'failed' && retryAt !== undefined ? { retryAt: new Date(retryAt).toISOString() } : {}) };
      this.warn(`${record.action}: ${record.error}`, fields, `autoscaler ${record.action} ${record.outcome}: ${record.error}`);
    }
  }

  private async readPolicy(): Promise<ScalePolicy | undefined> {
    const raw = await this.deps.inventory.policy();
    if (raw === undefined) {
      this.policy = undefined;
      return undefined;
    }
    try {
      this.policy = parsePolicy(raw);
    } catch (error) {
      // Refused when written; one that got through anyway (two writes racing) leaves the last valid one in force.
      if (!(error instanceof PolicyError)) throw error;
      this.deps.log.warn({ field: error.field }, `autoscaler policy ignored: ${error.message}`);
    }
    return this.policy;
  }

  private dropOlderThan(since: number): void {
    const first = this.samples.findIndex((sample) => sample.at >= since);
    this.samples = first < 0 ? [] : this.samples.slice(first);
  }

  /** A warning, once per distinct reason per cooldown; the repeats held back in between are counted in the next one. */
  private warn(reason: string, fields: Record<string, unknown>, message: string): void {
    const held = this.warnings.admit(reason, this.deps.clock.now(), this.policy?.cooldownMs ?? POLICY_DEFAULTS.cooldownMs);
    if (held === undefined) return;
    this.deps.log.warn(held > 0 ? { ...fields, repeated: held } : fields, message);
  }

  private scheduleTick(): void {
    this.cancelTick = this.deps.clock.setTimeout(() => {
      void this.tick()
        .catch((error: unknown) => this.warn(`evaluation: ${(error as Error).message}`, { err: error }, `autoscaler evaluation failed: ${(error as Error).message}`))
        .finally(() => {
          if (!this.stopped) this.scheduleTick();
        });
    }, this.deps.intervalMs);
  }

  /**
   * The sweep is a decision for the whole cluster too: only the lease holder runs it, in a term whose claim went
   * through, its deletes fenced by that term; and never during its own scale-in, whose node still reads its
   * `terminating` record before it stops.
   */
  private scheduleSweep(): void {
    this.cancelSweep = this.deps.clock.setTimeout(() => {
      const fence = this.deps.lease.fence();
      const sweep = fence && fence.term === this.claimedTerm && !this.acting ? this.deps.actions.sweep(fence) : Promise.resolve(0);
      void sweep
        .then((deleted) => {
          if (deleted > 0) this.deps.log.info({ deleted }, 'autoscaler swept terminating records');
        })
        .catch((error: unknown) => {
          if (error instanceof FencedWriteRefused) this.fencedOut(error);
          else this.warn(`sweep: ${(error as Error).message}`, { err: error }, `autoscaler sweep failed: ${(error as Error).message}`);
        })
        .finally(() => {
          if (!this.stopped) this.scheduleSweep();
        });
    }, this.deps.sweepIntervalMs);
  }
}
