import type { Fence } from '../db/fence.js';
import type { Clock } from '../runtime/clock.js';
import type { AutoscalerLog, ScaleActions } from './ports.js';

/** The action was stopped before the provider request: the node goes back into service. */
export class Cancelled extends Error {}

export interface ScaleInDeps {
  /** This server: removing it is a scale to zero, whose provider request is answered once it is gone. */
  serverId: string;
  actions: ScaleActions;
  clock: Clock;
  /** Between the `terminating` record and the provider request (0 = none). */
  removalNoticeMs: number;
  log: AutoscalerLog;
}

/**
 * One scale-in (SPEC 14.4): drain, commit `terminating`, the notice, the provider request, then the node's
 * shutdown. Until the provider request it can be cancelled (a stop, a lost lease): the node goes back to
 * `running` and into service. Its record's writes carry the term it was decided in; one the store refuses
 * (a later holder wrote the record) ends it as a cancellation does, the node back in service.
 */
export class ScaleIn {
  private cancelled = false;
  private endNotice: (() => void) | undefined;
  /** Past the provider request: nothing cancels it any more. */
  private committed = false;
  /** Set while this server asks its provider to remove this very server. */
  private removingSelf: AbortController | undefined;

  constructor(
    private readonly deps: ScaleInDeps,
    readonly serverId: string,
    private readonly fence: Fence,
  ) {}

  /** Stops it when it is still before the provider request; one past it runs to its end. */
  cancel(): void {
    if (this.committed) return;
    this.cancelled = true;
    this.endNotice?.();
  }

  /**
   * Gives up on the answer to this server's own removal (its stop): the provider is what stops it, and may answer
   * only once this process has exited. False when this is not a removal of this server under way.
   */
  abandonSelfRemoval(): boolean {
    if (!this.removingSelf) return false;
    this.removingSelf.abort();
    return true;
  }

  async run(isStopped: () => boolean): Promise<void> {
    const { actions } = this.deps;
    const target = this.serverId;
    let drained: boolean;
    try {
      drained = await actions.drain(target);
    } catch (error) {
      // Refused or timed out half-way: whatever part of the node did drain serves again.
      await this.undrainQuietly();
      throw error;
    }
    if (!drained) throw new Cancelled(`server ${target} disappeared during the drain`);
    if (this.cancelled) {
      await actions.undrain(target);
      throw new Cancelled('stopped during the drain');
    }
    try {
      await actions.setStatus(target, 'terminating', this.fence);
    } catch (error) {
      // Not committed (refused: a later holder wrote the record; or the store failed): the node serves again.
      await this.undrainQuietly();
      throw error;
    }
    // The notice: the drained node answers 307, and its record says it is going. A stop or a lost lease ends it early.
    if (this.deps.removalNoticeMs > 0 && !this.cancelled) {
      await new Promise<void>((resolve) => {
        const cancelTimer = this.deps.clock.setTimeout(resolve, this.deps.removalNoticeMs);
        this.endNotice = () => (cancelTimer(), resolve());
      });
    }
    if (!this.cancelled) {
      try {
        // The provider is not fenced: the last fenced write comes right before its request, so a later holder's
        // claim of the cluster (a takeover this server has not heard of) stops the removal here.
        await actions.claimServer(target, this.fence);
      } catch (error) {
        await this.undrainQuietly();
        throw error;
      }
    }
    if (this.cancelled) return this.backToService();
    // From here on the machine is going: nothing cancels the provider request.
    this.committed = true;
    const self = target === this.deps.serverId;
    if (self) this.removingSelf = new AbortController();
    try {
      await actions.terminate(target, this.removingSelf?.signal);
    } catch (error) {
      // Asking to be removed, this server was stopped before the answer came: the provider did its part.
      if (self && isStopped()) return;
      this.removingSelf = undefined;
      // The node is still there: it goes back into service. Its record stays `failed`, left for people (the
      // sweep only removes `terminating`), and it is never picked again.
      try {
        await actions.setStatus(target, 'failed', this.fence);
      } finally {
        await this.undrainQuietly();
      }
      throw error;
    }
    await actions.shutdown(target);
  }

  /** Cancelled after `terminating` was committed: the record back to `running`, the node into service. */
  private async backToService(): Promise<never> {
    try {
      await this.deps.actions.setStatus(this.serverId, 'running', this.fence);
    } finally {
      await this.undrainQuietly();
    }
    throw new Cancelled('stopped before the provider request');
  }

  private async undrainQuietly(): Promise<void> {
    try {
      await this.deps.actions.undrain(this.serverId);
    } catch (error) {
      this.deps.log.warn({ server: this.serverId, err: error }, `autoscaler could not take ${this.serverId} back into service: ${(error as Error).message}`);
    }
  }
}
