import type { Store } from './types.js';

export interface StoreCacheOptions {
  /** How stale an entry may be in a process that did not write it (default 250 ms). */
  revalidateMs?: number;
  /** Entry cap; keys come from requests, so an attacker must not grow the cache forever. */
  maxEntries?: number;
  /**
   * Longest any entry is served without reading the store again (default 60 s; applied at the counter check, so
   * up to `revalidateMs` later), whatever the counters say: the backstop for a write whose counter bump was lost.
   */
  maxAgeMs?: number;
  now?: () => number;
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
 */
export class StoreCache {
  private readonly entries = new Map<string, unknown>();
  private readonly revalidateMs: number;
  private readonly maxEntries: number;
  private readonly maxAgeMs: number;
  private clearedAt: number;
  private readonly now: () => number;
  private token: string | undefined;
  private checkedAt = Number.NEGATIVE_INFINITY;
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
    this.clearedAt = this.now();
    this.unsubscribe = store.onChange((collection) => {
      if (collections.includes(collection)) this.clear();
    });
  }

  /** The cached value for `key`, else what `load` returns (cached unless the cache was cleared meanwhile). */
  async get<T>(key: string, load: () => Promise<T>): Promise<T> {
    if (this.now() - this.checkedAt >= this.revalidateMs) await this.revalidate();
    if (this.entries.has(key)) return this.entries.get(key) as T;
    const generation = this.generation;
    const value = await load();
    if (generation === this.generation) {
      if (this.entries.size >= this.maxEntries) this.entries.delete(this.entries.keys().next().value!);
      this.entries.set(key, value);
    }
    return value;
  }

  /**
   * The cached value for `key` without waiting, when there is one and the cache needs no revalidation now;
   * otherwise `undefined` (then call `get`). Spares the hot path of a cache hit its promises.
   */
  peek<T>(key: string): T | undefined {
    if (this.now() - this.checkedAt >= this.revalidateMs) return undefined;
    return this.entries.get(key) as T | undefined;
  }

  get size(): number {
    return this.entries.size;
  }

  has(key: string): boolean {
    return this.entries.has(key);
  }

  clear(): void {
    this.clearedAt = this.now();
    this.generation += 1;
    this.entries.clear();
  }

  /** Drops the entries `matches` picks (an inactive organization's, say); returns how many. */
  deleteWhere(matches: (key: string, value: unknown) => boolean): number {
    let deleted = 0;
    for (const [key, value] of this.entries) {
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

  private async revalidate(): Promise<void> {
    this.checkedAt = this.now();
    if (this.checkedAt - this.clearedAt >= this.maxAgeMs) this.clear();
    const token = await this.store.changeToken(this.collections);
    if (token !== this.token) {
      this.token = token;
      this.clear();
    }
  }
}
