/**
 * A change token from per-collection write counters: their values in the order the caller named the
 * collections (0 for one never written). Callers name the same collections every time, so that is enough to
 * tell two tokens apart, and a token built from counters read in SQL equals one built from counters heard on a
 * change feed: a cache compares the two when the feed is lost and the store reads the counters again.
 */
export function counterToken(collections: readonly string[], versionOf: (collection: string) => number): string {
  return [...new Set(collections)].map((collection) => versionOf(collection)).join(',');
}

/**
 * This process's copy of the store's write counters, kept by a change feed (PostgreSQL `LISTEN/NOTIFY`,
 * MongoDB change streams) so that `changeToken` answers without a query while the feed is live. Counters only
 * grow, so the highest value seen wins however the feed's messages, this process's writes and reads of the
 * store interleave.
 */
export class CounterMirror {
  /** True while every commit to the counters reaches this copy (the feed's connection is up and listening). */
  live = false;
  private readonly versions = new Map<string, number>();
  /** Whether a collection missing from `versions` is known never to have been written (the copy was seeded). */
  private complete = false;
  /** Whether the feed listened before: only then can a seeding find writes it missed. */
  private seeded = false;
  /** Collections this process wrote without learning the counter's new value (it must be read again). */
  private readonly stale = new Set<string>();

  /** A counter value heard or read; true when it is news (higher than any this copy had). */
  observe(collection: string, version: number): boolean {
    const known = this.versions.get(collection);
    if (known !== undefined && known >= version) return false;
    this.versions.set(collection, version);
    return true;
  }

  /**
   * Every counter of the store, read once the feed listens: answers the collections whose counter moved since
   * this copy last knew it (writes the feed missed while it was down), none on the first seeding.
   */
  seed(rows: Iterable<readonly [string, number]>): string[] {
    const moved: string[] = [];
    for (const [collection, version] of rows) if (this.observe(collection, version) && this.seeded) moved.push(collection);
    this.seeded = true;
    this.complete = true;
    this.stale.clear();
    return moved;
  }

  /** This process wrote `collection`; without the counter's new value, the next token reads the store. */
  wrote(collection: string, version?: number): void {
    if (version === undefined) this.stale.add(collection);
    else this.observe(collection, version);
  }

  /** Counters read from the store for `collections` (a query made while this copy could not answer). */
  learn(collections: readonly string[], versions: ReadonlyMap<string, number>): void {
    for (const collection of collections) {
      this.observe(collection, versions.get(collection) ?? 0);
      this.stale.delete(collection);
    }
  }

  /** The feed said something changed without saying what: nothing here is trusted until read again. */
  forget(): void {
    this.versions.clear();
    this.stale.clear();
    this.complete = false;
  }

  /** The token of `collections` without a query, or undefined when the store must be read. */
  token(collections: readonly string[]): string | undefined {
    if (!this.live) return undefined;
    for (const collection of collections) {
      if (this.stale.has(collection) || (!this.complete && !this.versions.has(collection))) return undefined;
    }
    return counterToken(collections, (collection) => this.versions.get(collection) ?? 0);
  }
}

/** Delay before the `attempt`-th (0-based) try to re-open a change feed: 100 ms doubling to 5 s, with jitter. */
export function feedRetryDelayMs(attempt: number): number {
  return Math.min(5_000, 100 * 2 ** Math.min(attempt, 6)) * (0.5 + Math.random() / 2);
}
