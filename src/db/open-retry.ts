import { setTimeout as sleep } from 'node:timers/promises';
import { StoreUnavailableError } from './errors.js';
import { openStore, type StoreConfig } from './open.js';
import type { Store } from './types.js';

export interface StoreOpenAttempt {
  /** 1 for the first attempt. */
  attempt: number;
  error: StoreUnavailableError;
  /** How long until the next attempt. */
  retryInMs: number;
}

export interface OpenStoreWithRetryOptions {
  /** Told of every failed attempt before the wait (e.g. to keep `/readyz` at 503 with the reason). */
  onAttempt?(attempt: StoreOpenAttempt): void;
  /** Stops retrying: the promise rejects with the last error (or the abort reason before the first failure). */
  signal?: AbortSignal;
  initialDelayMs?: number;
  maxDelayMs?: number;
  /** Default: `openStore`. */
  connect?(config: StoreConfig): Promise<Store>;
  /** Default: a timer; tests pass one that resolves at once. */
  wait?(ms: number, signal?: AbortSignal): Promise<void>;
}

export interface StoreOpenLog {
  warn(fields: Record<string, unknown>, message: string): void;
}

/**
 * Opens the store, retrying while it is unreachable (`StoreUnavailableError`) with an exponential backoff
 * (jittered, capped at `maxDelayMs`) and one log line per failed attempt; other failures (a server too old or
 * standalone, an embedded file that cannot be opened, invalid settings) are not retried.
 */
export async function openStoreWithRetry(config: StoreConfig, log: StoreOpenLog, options: OpenStoreWithRetryOptions = {}): Promise<Store> {
  const connect = options.connect ?? openStore;
  const wait = options.wait ?? ((ms, signal) => sleep(ms, undefined, { signal }));
  const initialDelayMs = options.initialDelayMs ?? 500;
  const maxDelayMs = options.maxDelayMs ?? 30_000;
  for (let attempt = 1; ; attempt += 1) {
    options.signal?.throwIfAborted();
    try {
      return await connect(config);
    } catch (error) {
      if (!(error instanceof StoreUnavailableError)) throw error;
      if (options.signal?.aborted) throw error;
      const base = Math.min(maxDelayMs, initialDelayMs * 2 ** Math.min(attempt - 1, 30));
      const retryInMs = Math.round(base / 2 + (Math.random() * base) / 2);
      log.warn({ attempt, retryInMs, code: error.code, err: error.message }, `the store is unavailable (attempt ${attempt}); retrying in ${retryInMs} ms`);
      options.onAttempt?.({ attempt, error, retryInMs });
      try {
        await wait(retryInMs, options.signal);
      } catch {
        throw error;
      }
    }
  }
}
