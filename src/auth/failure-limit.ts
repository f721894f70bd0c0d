import { Type } from '@sinclair/typebox';
import { lazyCheck } from '../schema/lazy-check.js';
import type { Clock } from '../runtime/clock.js';
import { systemClock } from '../runtime/clock.js';

export interface FailureLimitOptions {
  /** Failed authentications an address may make at once (the bucket's size); 0 turns the limit off. */
  max?: number;
  /** Time in which a spent allowance refills completely: one more failure every `windowMs / max`. */
  windowMs?: number;
  /** Addresses remembered at most; past that the one that failed least recently is forgotten. */
  maxAddresses?: number;
  clock?: Pick<Clock, 'now'>;
}

export const FAILURE_LIMIT_DEFAULTS = { max: 20, windowMs: 10_000, maxAddresses: 10_000, delayMs: 500 } as const;

/** `auth.failureLimit`: the limiter's options, and how long the authorizer holds a 429 before answering. */
export type FailureLimitSettings = Omit<FailureLimitOptions, 'clock'> & { delayMs?: number };

/**
 * Where the failures of a server are counted: every process of a server asks the same one (its primary), so a
 * client address has one allowance whichever worker its connections reach. Answers as `FailureLimiter.fail`.
 */
export interface FailureLedger {
  fail(address: string): number | Promise<number>;
}

/** The RPC a worker reports a failed authentication with to its primary's ledger. */
export const FAILURE_REPORT_METHOD = 'primary.auth.failure' as const;
/** A worker's report of a failed authentication (an IPC message: checked where it is received). */
export const FailureReport = Type.Object({ address: Type.String({ minLength: 1, maxLength: 128 }) }, { additionalProperties: false });
export const failureReportCheck = lazyCheck(FailureReport);

/** Key ids that authenticated from an address, kept while it has an entry; a few cover every real client. */
const VERIFIED_PER_ADDRESS = 4;

interface Entry {
  /** Failures still allowed now (fractional while refilling; down to `-max` while an address keeps failing). */
  allowance: number;
  updatedMs: number;
  verified?: string[];
  /** When a key this process knows nothing about was last looked up for this address while it was limited. */
  lookupAtMs?: number;
}

/**
 * SPEC 8.7: failed authentications per client address, as a token bucket. An address may fail `max` times at
 * once, then once every `windowMs / max`; while its allowance is spent, `retryAfterMs` says how long until the
 * next failure would be allowed. A failure past the limit is charged as well (the allowance goes down to
 * `-max`), so an address that keeps failing stays limited whatever it sends: were refused attempts free, the
 * allowance coming back every `windowMs / max` would go to whichever request came first after it, and a
 * prober alternating two kinds of key would see one always answered 403 and the other always 429. One that
 * stops failing may fail again within `windowMs + windowMs / max`. Only addresses that failed are tracked, and
 * at most `maxAddresses` of them: an attacker rotating addresses pushes out the quietest ones, never grows
 * memory.
 */
export class FailureLimiter {
  readonly max: number;
  readonly windowMs: number;
  private readonly maxAddresses: number;
  private readonly clock: Pick<Clock, 'now'>;
  /** In order of the last failure (or refusal), oldest first, so eviction takes the first. */
  private readonly entries = new Map<string, Entry>();

  constructor(options: FailureLimitOptions = {}) {
    this.max = options.max ?? FAILURE_LIMIT_DEFAULTS.max;
    this.windowMs = Math.max(1, options.windowMs ?? FAILURE_LIMIT_DEFAULTS.windowMs);
    this.maxAddresses = Math.max(1, options.maxAddresses ?? FAILURE_LIMIT_DEFAULTS.maxAddresses);
    this.clock = options.clock ?? systemClock;
  }

  get enabled(): boolean {
    return this.max > 0;
  }

  /** Addresses tracked now. */
  get size(): number {
    return this.entries.size;
  }

  /** 0 while `address` may still fail; otherwise the milliseconds until its next failure is allowed. */
  retryAfterMs(address: string): number {
    const entry = this.entries.get(address);
    if (!entry) return 0;
    const wait = this.waitMs(this.refill(entry));
    // An address kept refused is an active one: it must not be the first to be forgotten.
    if (wait > 0) this.touch(address, entry);
    return wait;
  }

  /**
   * Records a failed authentication. Returns 0 when it was within the allowance (answer it as any refusal),
   * otherwise the milliseconds until the next failure is allowed (answer 429); either way it is charged.
   */
  fail(address: string): number {
    if (!this.enabled) return 0;
    const entry = this.tracked(address);
    const allowance = this.refill(entry);
    entry.allowance = Math.max(-this.max, allowance - 1);
    return allowance < 1 ? this.waitMs(entry.allowance) : 0;
  }

  /**
   * What the server's ledger answered for a failure of `address` (0: within its allowance): this process's
   * view of the address follows it, so that `retryAfterMs` here says what the ledger would.
   */
  observe(address: string, retryAfterMs: number): void {
    if (!this.enabled) return;
    const entry = this.tracked(address);
    const allowance = this.refill(entry);
    entry.allowance = retryAfterMs > 0 ? Math.max(-this.max, 1 - (retryAfterMs * this.max) / this.windowMs) : Math.max(allowance, 1);
  }

  /** Remembers that `keyId` authenticated from `address` (only for an address that has failed). */
  succeeded(address: string, keyId: string): void {
    const entry = this.entries.get(address);
    if (!entry || entry.verified?.includes(keyId)) return;
    entry.verified = [keyId, ...(entry.verified ?? [])].slice(0, VERIFIED_PER_ADDRESS);
  }

  /** Whether `keyId` authenticated from `address` since the address started failing. */
  verified(address: string, keyId: string): boolean {
    return this.entries.get(address)?.verified?.includes(keyId) ?? false;
  }

  /**
   * While `address` is over its limit, a key id this process knows nothing about may still be looked up, once
   * every `windowMs / max`: a valid key never seen here is not locked out for good (it passes on a retry at the
   * latest), and a flood of made-up keys costs at most that many store reads.
   */
  takeLookup(address: string): boolean {
    const entry = this.entries.get(address);
    if (!entry) return true;
    const now = this.clock.now();
    if (entry.lookupAtMs !== undefined && now - entry.lookupAtMs < this.windowMs / this.max) return false;
    entry.lookupAtMs = now;
    return true;
  }

  private refill(entry: Entry): number {
    const now = this.clock.now();
    const refilled = entry.allowance + ((now - entry.updatedMs) * this.max) / this.windowMs;
    // Rounded so that many small refills add up to whole failures exactly.
    entry.allowance = Math.min(this.max, Math.round(refilled * 1e9) / 1e9);
    entry.updatedMs = now;
    return entry.allowance;
  }

  private waitMs(allowance: number): number {
    // Less a hair, so that float dust (0.998 → 1.0000000000000009 ms) does not add a millisecond.
    return allowance >= 1 ? 0 : Math.max(1, Math.ceil(((1 - allowance) * this.windowMs) / this.max - 1e-6));
  }

  /** The entry of `address`, made when there is none (forgetting the oldest past `maxAddresses`), as the newest. */
  private tracked(address: string): Entry {
    let entry = this.entries.get(address);
    if (!entry) {
      if (this.entries.size >= this.maxAddresses) this.entries.delete(this.entries.keys().next().value!);
      entry = { allowance: this.max, updatedMs: this.clock.now() };
    }
    this.touch(address, entry);
    return entry;
  }

  private touch(address: string, entry: Entry): void {
    this.entries.delete(address);
    this.entries.set(address, entry);
  }
}
