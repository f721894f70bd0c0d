import { randomBytes } from 'node:crypto';
import { DuplicateKeyError } from './errors.js';
import type { Fence } from './fence.js';
import type { Collection, Document, Store } from './types.js';

/**
 * The collection of leases. Its name is under the store's internal prefix: `/crud` refuses it to every key
 * (a tenant can neither read nor forge a lease, and no key can take one over by hand).
 */
export const LEASES_COLLECTION = 'fleetplane_leases';

/** Time as the lease sees it; `systemClock` of `src/runtime/clock.ts` is one, and so is the tests' fake clock. */
export interface LeaseClock {
  now(): number;
  /** Schedules `fn`; the returned function cancels it. */
  setTimeout(fn: () => void, ms: number): () => void;
}

/** One lease as stored: who holds it, until when (on the holder's clock), and the holder's fenced data. */
export interface LeaseDocument extends Document {
  owner: string;
  /** Random per holder instance: a restarted server with the same id is another holder. */
  token: string;
  /** Grows by one each time the lease changes hands (a fencing number). */
  term: number;
  /** Milliseconds since the epoch, on the clock of the holder that wrote it. */
  expiresAt: number;
  renewedAt: number;
  /** Written only by the holder while it holds the lease (`record`); read by the next holder when it takes over. */
  data?: Record<string, unknown>;
}

/**
 * Why a holder stopped holding: another holder's token found in the lease (`taken`), a fenced write refused
 * because a later term wrote there (`refused`), or its own expiry reached with no renewal in the store
 * (`expired`: the store did not answer, or too late).
 */
export type LeaseLoss = 'taken' | 'refused' | 'expired';

/** What anyone may learn of a lease: never its token. */
export interface LeaseView {
  owner: string;
  term: number;
  expiresAt: number;
}

export interface LeaseOptions {
  store: Pick<Store, 'collection'>;
  /** The lease's id, e.g. `decider:<cluster>`: one document per name. */
  name: string;
  /** Who holds it, as people read it (a server id). */
  owner: string;
  /** How long a take or renewal holds, from the moment it was sent. */
  ttlMs: number;
  /**
   * The largest difference assumed between the clocks of any two holders. An expired lease is taken over only
   * this long after its expiry (judged on the taker's clock), so a holder whose clock is behind by up to this
   * much has stopped acting before anyone else starts.
   */
  maxClockSkewMs: number;
  clock: LeaseClock;
}

/**
 * A lease held in the store: a document with an owner and an expiry, taken and renewed only by conditional
 * writes, so among any number of processes and servers sharing the store at most one holds it at a time.
 *
 * - **Take.** A missing lease is inserted (the `_id` is unique: of two inserts one fails). An existing one is
 *   taken only once it expired `maxClockSkewMs` ago, by an update filtered on the token and expiry just read: a
 *   renewal or another taker in between changes them, the filter then matches nothing, and the matched count
 *   tells who won. Embedded: the update runs in a `BEGIN IMMEDIATE` transaction on the shared file; MongoDB: in a
 *   transaction, where a concurrent writer conflicts and the retried filter no longer matches.
 * - **Hold.** `held()` is true until the expiry this holder wrote, on its own clock; no other holder can take the
 *   lease before that expiry plus `maxClockSkewMs` on theirs. The assumption: clocks of hosts sharing a store
 *   differ by less than `maxClockSkewMs` (NTP keeps them within milliseconds).
 * - **Renew** before expiry (`keep` renews every third of the TTL). A renewal that matches nothing means the lease
 *   was taken over: `held()` turns false at once and the `lost` listeners run. A store error proves nothing, so it
 *   changes nothing: the lease runs out on its own at its expiry, when the `lost` listeners run too (a holder cut
 *   from the store stops acting within its TTL, and hears of it).
 * - **Fence.** `record(fields)` writes into the lease's `data` only while this holder's token and term are in the
 *   document and its expiry is ahead: what a holder records before acting (its last action's time) is what the
 *   next holder reads when it takes over, so a hand-over never restarts a cooldown. `fence()` is the token other
 *   documents' writes carry (`./fence.ts`); one the store refused is reported with `refused()`, and the holder
 *   stops as after a takeover. Fencing is what still holds when the clock assumption does not: a holder whose
 *   clock is behind by more than `maxClockSkewMs` may believe it holds a lease already taken over, and its writes
 *   are then refused by every document the new holder wrote.
 */
export class StoreLease {
  private readonly token = randomBytes(12).toString('hex');
  private readonly lostListeners = new Set<(loss: LeaseLoss) => void>();
  /** The expiry this holder last wrote, on its own clock; -Infinity while it does not hold the lease. */
  private heldUntil = Number.NEGATIVE_INFINITY;
  private heldTerm: number | undefined;
  private cancelExpiry: (() => void) | undefined;
  /** Its own expiry passed: its token may still be in the store, for `release()` to clear. */
  private expiredUnreleased = false;
  private stored: Record<string, unknown> = {};
  private inFlight: Promise<boolean> | undefined;

  constructor(private readonly options: LeaseOptions) {
    if (!(options.ttlMs > 0) || !(options.maxClockSkewMs >= 0)) throw new RangeError('a lease needs ttlMs > 0 and maxClockSkewMs >= 0');
  }

  get name(): string {
    return this.options.name;
  }

  /** Whether this holder holds the lease now (its own expiry not reached, and no takeover seen). */
  held(): boolean {
    return this.options.clock.now() < this.heldUntil;
  }

  /** The term this holder holds, or undefined. */
  term(): number | undefined {
    return this.held() ? this.heldTerm : undefined;
  }

  /** The fencing token of this holder's term (`./fence.ts`), or undefined while it does not hold the lease. */
  fence(): Fence | undefined {
    const term = this.term();
    return term === undefined ? undefined : { lease: this.options.name, term };
  }

  /**
   * The store refused a write fenced by `fence`: a later term wrote the document, so the lease changed hands. A
   * holder still in that term stops at once (`held()` false, the `lost` listeners run); an older fence changes nothing.
   */
  refused(fence: Fence): void {
    if (fence.lease === this.options.name && this.heldTerm !== undefined && fence.term >= this.heldTerm) this.lose('refused');
  }

  /** The lease's data as this holder last read or wrote it (read when it took the lease). */
  data(): Readonly<Record<string, unknown>> {
    return this.stored;
  }

  /** Runs `listener` each time this holder stops holding the lease, but for `release()`: see `LeaseLoss`. */
  onLost(listener: (loss: LeaseLoss) => void): () => void {
    this.lostListeners.add(listener);
    return () => this.lostListeners.delete(listener);
  }

  /**
   * Takes the lease when it is free (or expired for long enough), renews it when this holder holds it.
   * Resolves with whether this holder holds it now; rejects on a store error (held() is then unchanged).
   * Calls made while one runs share its outcome.
   */
  acquire(): Promise<boolean> {
    this.inFlight ??= this.attempt().finally(() => {
      this.inFlight = undefined;
    });
    return this.inFlight;
  }

  /**
   * Writes `fields` into the lease's `data`, only while this holder holds it in the store. False: not held (a
   * takeover, or its own expiry passed); the holder must not act on what the write was to record.
   */
  async record(fields: Record<string, unknown>): Promise<boolean> {
    if (!this.held()) return false;
    const set: Record<string, unknown> = {};
    for (const [field, value] of Object.entries(fields)) set[`data.${field}`] = value;
    const now = this.options.clock.now();
    const result = await this.leases().updateOne({ _id: this.options.name, token: this.token, term: this.heldTerm, expiresAt: { $gt: now } }, { $set: set });
    if (result.matchedCount !== 1) {
      this.lose('taken');
      return false;
    }
    this.stored = { ...this.stored, ...fields };
    return true;
  }

  /** Gives the lease up at once (a graceful stop): another holder may take it without waiting for its expiry. */
  async release(): Promise<void> {
    if (this.heldTerm === undefined && !this.expiredUnreleased) return;
    this.heldUntil = Number.NEGATIVE_INFINITY;
    this.heldTerm = undefined;
    this.expiredUnreleased = false;
    this.cancelExpiry?.();
    await this.leases().updateOne({ _id: this.options.name, token: this.token }, { $set: { expiresAt: 0 } });
  }

  /** The lease as stored now (owner, term, expiry), or null when nobody ever took it. */
  async read(): Promise<LeaseView | null> {
    const document = await this.leases().findOne({ _id: this.options.name });
    return document ? { owner: document.owner, term: document.term, expiresAt: document.expiresAt } : null;
  }

  /**
   * Tries to take or renew the lease now and then every third of the TTL, while `eligible()` says this holder
   * may hold it (a holder that is no longer eligible releases it). Errors go to `onError`. Returns the stop.
   */
  keep(options: { eligible?: () => boolean; onError?: (error: unknown) => void } = {}): () => void {
    const { clock, ttlMs } = this.options;
    let stopped = false;
    let cancel: (() => void) | undefined;
    const round = async () => {
      if (options.eligible && !options.eligible()) await this.release();
      else await this.acquire();
    };
    const schedule = () => {
      cancel = clock.setTimeout(() => {
        void round()
          .catch((error: unknown) => options.onError?.(error))
          .finally(() => {
            if (!stopped) schedule();
          });
      }, Math.max(1, Math.floor(ttlMs / 3)));
    };
    schedule();
    return () => {
      stopped = true;
      cancel?.();
    };
  }

  private async attempt(): Promise<boolean> {
    const { clock, ttlMs, maxClockSkewMs, name, owner } = this.options;
    const leases = this.leases();
    // Judged from the moment the write is sent: a write that takes long holds for less, never for more.
    const now = clock.now();
    const expiresAt = now + ttlMs;
    if (this.heldTerm === undefined) {
      const current = await leases.findOne({ _id: name });
      // This holder's token already there: an earlier take landed, its answer did not. It renews below.
      if (current?.token !== this.token) {
        if (current) {
          if (current.expiresAt + maxClockSkewMs > now) return false;
          const taken = await leases.updateOne(
            { _id: name, token: current.token, expiresAt: current.expiresAt },
            { $set: { owner, token: this.token, expiresAt, renewedAt: now }, $inc: { term: 1 } },
          );
          if (taken.matchedCount !== 1) return false;
        } else {
          try {
            await leases.insertOne({ _id: name, owner, token: this.token, term: 1, expiresAt, renewedAt: now, data: {} });
          } catch (error) {
            if (error instanceof DuplicateKeyError) return false;
            throw error;
          }
        }
        return this.adopt(expiresAt);
      }
    }
    const renewed = await leases.updateOne({ _id: name, token: this.token }, { $set: { expiresAt, renewedAt: now } });
    if (renewed.matchedCount !== 1) {
      this.lose('taken');
      return false;
    }
    if (this.heldTerm === undefined) return this.adopt(expiresAt);
    this.holdUntil(expiresAt);
    return true;
  }

  /** The document as this holder took it: its term, and the data the previous holder recorded. */
  private async adopt(expiresAt: number): Promise<boolean> {
    const mine = await this.leases().findOne({ _id: this.options.name, token: this.token });
    if (!mine) return false;
    this.heldTerm = mine.term;
    this.stored = { ...(mine.data ?? {}) };
    this.expiredUnreleased = false;
    this.holdUntil(expiresAt);
    return this.held();
  }

  /** Held until `expiresAt` on this holder's clock; at that instant, unless renewed, the holder hears it stopped. */
  private holdUntil(expiresAt: number): void {
    const { clock } = this.options;
    this.heldUntil = expiresAt;
    this.cancelExpiry?.();
    const watch = () => {
      this.cancelExpiry = clock.setTimeout(() => {
        this.cancelExpiry = undefined;
        if (this.heldTerm === undefined) return;
        // A timer may fire a little before the instant on the clock it is compared with.
        if (this.held()) watch();
        else this.lose('expired');
      }, Math.max(1, this.heldUntil - clock.now()));
    };
    watch();
  }

  private lose(loss: LeaseLoss): void {
    const wasHeld = this.heldTerm !== undefined;
    this.heldUntil = Number.NEGATIVE_INFINITY;
    this.heldTerm = undefined;
    this.cancelExpiry?.();
    this.cancelExpiry = undefined;
    if (!wasHeld) return;
    // Run out on its own clock, its token is still in the store unless someone took over: a release clears it.
    this.expiredUnreleased = loss === 'expired';
    for (const listener of this.lostListeners) {
      try {
        listener(loss);
      } catch {
        // A listener's failure is its own: the others still hear of the loss.
      }
    }
  }

  private leases(): Collection<LeaseDocument> {
    return this.options.store.collection<LeaseDocument>(LEASES_COLLECTION);
  }
}
