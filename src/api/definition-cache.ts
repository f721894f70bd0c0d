import type { Store } from '../db/types.js';

type Entry<T> = { value: T } | { error: Error } | { missing: true };

export interface DefinitionCacheOptions {
  /** How stale a definition may be in a process that did not write it (default 250 ms). */
  revalidateMs?: number;
  /** Cap on cached entries; names come from requests, so a caller must not grow the cache forever. */
  maxEntries?: number;
  now?: () => number;
}

/**
 * Named per-organization definitions (`apis`, `workflows`, `webhooks`), compiled once and cached per process.
 * Other processes and the CLI write the same store, so staleness is bounded the way the tenant directory bounds
 * it: the collection's change token is re-read at most every `revalidateMs`, and writes through this process's
 * store clear the cache at once. A definition that does not compile is cached as its error, so a broken one
 * costs one validation, not one per request.
 */
export class DefinitionCache<T> {
  private readonly entries = new Map<string, Entry<T>>();
  private readonly revalidateMs: number;
  private readonly maxEntries: number;
  private readonly now: () => number;
  private token: string | undefined;
  private checkedAt = Number.NEGATIVE_INFINITY;
  private generation = 0;
  private readonly unsubscribe: () => void;

  constructor(
    private readonly store: Store,
    private readonly collection: string,
    private readonly compile: (document: Record<string, unknown>) => T,
    options: DefinitionCacheOptions = {},
  ) {
    this.revalidateMs = options.revalidateMs ?? 250;
    this.maxEntries = options.maxEntries ?? 10_000;
    this.now = options.now ?? Date.now;
    this.unsubscribe = store.onChange((name) => {
      if (name === collection) this.clear();
    });
  }

  /** The compiled definition, null when the organization has none by that name; throws its compile error. */
  async get(organizationId: string, name: string): Promise<T | null> {
    if (this.now() - this.checkedAt >= this.revalidateMs) await this.revalidate();
    const key = `${organizationId}\u0000${name}`;
    let entry = this.entries.get(key);
    if (!entry) {
      const generation = this.generation;
      const document = await this.store.forOrganization(organizationId).collection(this.collection).findOne({ name });
      entry = this.toEntry(document);
      if (generation === this.generation) {
        if (this.entries.size >= this.maxEntries) this.entries.delete(this.entries.keys().next().value!);
        this.entries.set(key, entry);
      }
    }
    if ('value' in entry) return entry.value;
    if ('error' in entry) throw entry.error;
    return null;
  }

  close(): void {
    this.unsubscribe();
  }

  private toEntry(document: Record<string, unknown> | null): Entry<T> {
    if (!document) return { missing: true };
    try {
      return { value: this.compile(document) };
    } catch (error) {
      return { error: error as Error };
    }
  }

  private async revalidate(): Promise<void> {
    this.checkedAt = this.now();
    const token = await this.store.changeToken([this.collection]);
    if (token !== this.token) {
      this.token = token;
      this.clear();
    }
  }

  private clear(): void {
    this.generation += 1;
    this.entries.clear();
  }
}
