import { StoreError } from './errors.js';
import type { Store } from './types.js';

export interface StoreCacheOptions {
  /** How stale an entry may be in a process that did not write it (default 250 ms). */
  revalidateMs?: number;
  /** Entry cap; keys come from requests, so an attacker must not grow the cache forever. */
  maxEntries?: number;
  /**
   * Longest any entry is served without reading the store again (default 60 s), whatever the counters say: the
   * backstop for a write whose counter bump was lost, and how long an entry outlives a store that went away.
   */
  maxAgeMs?: number;
  now?: () => number;
}

/** Per store (the one that answers, under any decoration), what its caches last learned of whether it answers. */
const reachByStore = new WeakMap<Store, { away: boolean }>();

function reachOf(store: Store): { away: boolean } {
  let answering = store;
  while (answering.decorated) answering = answering.decorated;
  let reach = reachByStore.get(answering);
  if (!reach) reachByStore.set(answering, (reach = { away: false }));
  return reach;
}

interface Entry {
  value: unknown;
  loadedAt: number;
}

/**
 * A per-process cache of documents read from some collections of the store. Workers are separate processes
 * sharing the store, so invalidation cannot be a message from whoever wrote. Instead every write attempt bumps a
 * per-collection counter, in the same transaction when it commits and once more when it fails
 * (`Store.changeToken`, the store contract), and the cache compares the counters at most every `revalidateMs`
 * while it serves. On the embedded store that is one indexed read of the local file per interval, whatever the
 * request rate (`PRAGMA data_version` changes on every commit to any table). A networked store with a change
 * feed (PostgreSQL `LISTEN/NOTIFY`, MongoDB change streams) answers the comparison from memory and reports other
 * hosts' writes through `onChange` as they commit, so the cache drops its entries at once and makes no query of
 * its own; while the feed is down the store reads the counters again, and the cache polls them as on any store.
 * Writes through this process's store clear the cache at once, and nothing is kept longer than `maxAgeMs`.
 *
 * A store that cannot be reached (503: stopped, restarting, cut off) is no reason to refuse what the cache holds:
 * while the counters cannot be read, entries are served as they are, each until it is `maxAgeMs` old, and the
 * check goes on in the background instead of holding requests; what is not cached fails as the store does.
 */
export class StoreCache {
  private readonly entries = new Map<string, Entry>();
  private readonly revalidateMs: number;
  private readonly maxEntries: number;
  private readonly maxAgeMs: number;
  private readonly now: () => number;
  private token: string | undefined;
  private checkedAt = Number.NEGATIVE_INFINITY;
  /** The counter check in progress, shared by the requests that wait for it. */
  private checking: Promise<void> | undefined;
  /**
   * Whether the last counter check of any cache of this store found it unavailable: requests then do not wait for
   * the next check. Shared, so that a request consulting several caches (key, organization, provider) waits out a
   * store that no longer answers once, not once per cache.
   */
  private readonly reach: { away: boolean };
  /** Bumped on every clear; a load that started before a clear does not cache its (possibly stale) answer. */
  private generation = 0;
  private readonly unsubscribe: () => void;

  constructor(
    private readonly store: Store,
    private readonly collections: readonly string[],
    options: StoreCacheOptions = {},
  ) {
    this.revalidateMs = options.revalidateMs ?? 250;
    this.maxEntries = options.maxEntries ?? 10_000;
    this.maxAgeMs = options.maxAgeMs ?? 60_000;
    this.now = options.now ?? Date.now;
    this.reach = reachOf(store);
    this.unsubscribe = store.onChange((collection) => {
      if (collections.includes(collection)) this.clear();
    });
  }

  /** The cached value for `key`, else what `load` returns (cached unless the cache was cleared meanwhile). */
  async get<T>(key: string, load: () => Promise<T>): Promise<T> {
    if (this.now() - this.checkedAt >= this.revalidateMs) await this.revalidate();
    const entry = this.fresh(key);
    if (entry) return entry.value as T;
    const generation = this.generation;
    const loadedAt = this.now();
    const value = await load();
    if (generation === this.generation) {
      this.entries.delete(key);
      if (this.entries.size >= this.maxEntries) this.entries.delete(this.entries.keys().next().value!);
      this.entries.set(key, { value, loadedAt });
    }
    return value;
  }

  /**
   * The cached value for `key` without waiting, when there is one and the cache needs no revalidation now;
   * otherwise `undefined` (then call `get`). Spares the hot path of a cache hit its promises.
   */
  peek<T>(key: string): T | undefined {
    if (this.now() - this.checkedAt >= this.revalidateMs) return undefined;
    return this.fresh(key)?.value as T | undefined;
  }

  get size(): number {
    return this.entries.size;
  }

  has(key: string): boolean {
    return this.entries.has(key);
  }

  clear(): void {
    this.generation += 1;
    this.entries.clear();
  }

  /** Drops the entries `matches` picks (an inactive organization's, say); returns how many. */
  deleteWhere(matches: (key: string, value: unknown) => boolean): number {
    let deleted = 0;
    for (const [key, { value }] of this.entries) {
      if (matches(key, value)) {
        this.entries.delete(key);
        deleted += 1;
      }
    }
    return deleted;
  }

  close(): void {
    this.unsubscribe();
  }

  /** The entry for `key` unless it is `maxAgeMs` old (then it is dropped). */
  private fresh(key: string): Entry | undefined {
    const entry = this.entries.get(key);
    if (entry && this.now() - entry.loadedAt >= this.maxAgeMs) {
      this.entries.delete(key);
      return undefined;
    }
    return entry;
  }

  /** Compares the counters (one check at a time); while the store is away, without making the caller wait. */
  private revalidate(): Promise<void> {
    this.checkedAt = this.now();
    const check = (this.checking ??= this.compareCounters().finally(() => (this.checking = undefined)));
    if (!this.reach.away) return check;
    check.catch(() => undefined);
    return Promise.resolve();
  }

  private async compareCounters(): Promise<void> {
    let token: string;
    try {
      token = await this.store.changeToken(this.collections);
    } catch (error) {
      // Only a store that cannot answer now is waited out; one that refuses this server fails the requests.
      this.reach.away = error instanceof StoreError && error.statusCode === 503;
      if (!this.reach.away) throw error;
      return;
    }
    this.reach.away = false;
    if (token !== this.token) {
      this.token = token;
      this.clear();
    }
  }
}
