import type { Store } from '../db/types.js';
import { StoreCache, type StoreCacheOptions } from '../db/store-cache.js';

type Entry<T> = { value: T } | { error: Error } | { missing: true };

export type DefinitionCacheOptions = StoreCacheOptions;

/** A definition's cache key; with an empty name, the prefix of every key of the organization. */
const keyOf = (organizationId: string, name: string) => `${organizationId}\u0000${name}`;

/**
 * Named per-organization definitions (`apis`, `workflows`, `webhooks`), compiled once and cached per process.
 * Other processes and the CLI write the same store, so staleness is bounded the way the tenant directory bounds
 * it: the collection's change token is re-read at most every `revalidateMs`, and writes through this process's
 * store clear the cache at once. A definition that does not compile is cached as its error, so a broken one
 * costs one validation, not one per request.
 */
export class DefinitionCache<T> {
  private readonly cache: StoreCache;

  constructor(
    private readonly store: Store,
    private readonly collection: string,
    private readonly compile: (document: Record<string, unknown>) => T,
    options: DefinitionCacheOptions = {},
  ) {
    this.cache = new StoreCache(store, [collection], options);
  }

  /** The compiled definition, null when the organization has none by that name; throws its compile error. */
  async get(organizationId: string, name: string): Promise<T | null> {
    const key = keyOf(organizationId, name);
    // A cache hit needs no promise of its own: most requests name a definition used a moment ago.
    const entry =
      this.cache.peek<Entry<T>>(key) ??
      (await this.cache.get(key, async () => this.toEntry(await this.store.forOrganization(organizationId).collection(this.collection).findOne({ name }))));
    return this.valueOf(entry);
  }

  private valueOf(entry: Entry<T>): T | null {
    if ('value' in entry) return entry.value;
    if ('error' in entry) throw entry.error;
    return null;
  }

  /**
   * What `get` answers when the definition is cached, without a promise: the compiled definition, or null when
   * the organization has none by that name (it throws the compile error); undefined when it must be read.
   */
  peek(organizationId: string, name: string): T | null | undefined {
    const entry = this.cache.peek<Entry<T>>(keyOf(organizationId, name));
    return entry === undefined ? undefined : this.valueOf(entry);
  }

  /** SPEC 5.5: an inactive organization's definitions are released; they are read again when it returns. */
  forget(organizationId: string): number {
    const prefix = keyOf(organizationId, '');
    return this.cache.deleteWhere((key) => key.startsWith(prefix));
  }

  close(): void {
    this.cache.close();
  }

  private toEntry(document: Record<string, unknown> | null): Entry<T> {
    if (!document) return { missing: true };
    try {
      return { value: this.compile(document) };
    } catch (error) {
      return { error: error as Error };
    }
  }
}
