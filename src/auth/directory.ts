import type { KeyDocument, OrganizationDocument } from '../db/documents.js';
import type { Store } from '../db/types.js';

const WATCHED = ['organizations', 'keys'] as const;

/** A key record as authorization uses it: hash decoded, expiry parsed, hosts as a set. */
export interface KnownKey {
  record: KeyDocument;
  hash: Buffer;
  expiresAtMs?: number;
  hosts?: ReadonlySet<string>;
}

export interface DirectoryOptions {
  /** How stale a cached organization or key may be in a process that did not write it (default 250 ms). */
  revalidateMs?: number;
  /** Cap per cache; host names and key ids come from requests, so an attacker must not grow them forever. */
  maxEntries?: number;
  now?: () => number;
}

/** A Map that forgets its oldest entry past `capacity`. */
class BoundedMap<K, V> extends Map<K, V> {
  constructor(private readonly capacity: number) {
    super();
  }

  override set(key: K, value: V): this {
    if (!this.has(key) && this.size >= this.capacity) this.delete(this.keys().next().value as K);
    return super.set(key, value);
  }
}

/**
 * Organizations by host and keys by id, cached per process. Workers are separate processes sharing the store,
 * so invalidation cannot be a message from whoever wrote. Instead every write to `organizations` or `keys`
 * bumps a per-collection counter in the same transaction (`Store.changeToken`), and this cache re-reads the
 * counters at most every `revalidateMs`: one indexed read per interval, whatever the request rate, and it works
 * the same for workers, other servers on the host, the CLI and MongoDB. SQLite's `PRAGMA data_version` was the
 * alternative; it changes on every commit to any table (inventory saves would flush this cache constantly) and
 * does not exist for MongoDB. Writes made through this process's store clear the cache at once.
 */
export class TenantDirectory {
  private readonly organizations: BoundedMap<string, OrganizationDocument | null>;
  private readonly keys: BoundedMap<string, KnownKey | null>;
  private readonly revalidateMs: number;
  private readonly now: () => number;
  private token: string | undefined;
  private checkedAt = Number.NEGATIVE_INFINITY;
  /** Bumped on every clear; a lookup that started before a clear does not cache its (possibly stale) answer. */
  private generation = 0;
  private readonly unsubscribe: () => void;

  constructor(
    private readonly store: Store,
    options: DirectoryOptions = {},
  ) {
    this.revalidateMs = options.revalidateMs ?? 250;
    this.now = options.now ?? Date.now;
    const capacity = options.maxEntries ?? 10_000;
    this.organizations = new BoundedMap(capacity);
    this.keys = new BoundedMap(capacity);
    this.unsubscribe = store.onChange((collection) => {
      if ((WATCHED as readonly string[]).includes(collection)) this.clear();
    });
  }

  async organizationForHost(host: string): Promise<OrganizationDocument | null> {
    if (this.now() - this.checkedAt >= this.revalidateMs) await this.revalidate();
    const cached = this.organizations.get(host);
    if (cached !== undefined) return cached;
    const generation = this.generation;
    const found = await this.store.collection<OrganizationDocument>('organizations').findOne({ hosts: host });
    if (generation === this.generation) this.organizations.set(host, found);
    return found;
  }

  async key(keyId: string): Promise<KnownKey | null> {
    if (this.now() - this.checkedAt >= this.revalidateMs) await this.revalidate();
    const cached = this.keys.get(keyId);
    if (cached !== undefined) return cached;
    const generation = this.generation;
    const record = await this.store.collection<KeyDocument>('keys').findOne({ _id: keyId });
    const known = record ? toKnownKey(record) : null;
    if (generation === this.generation) this.keys.set(keyId, known);
    return known;
  }

  close(): void {
    this.unsubscribe();
  }

  private async revalidate(): Promise<void> {
    this.checkedAt = this.now();
    const token = await this.store.changeToken(WATCHED);
    if (token !== this.token) {
      this.token = token;
      this.clear();
    }
  }

  private clear(): void {
    this.generation += 1;
    this.organizations.clear();
    this.keys.clear();
  }
}

function toKnownKey(record: KeyDocument): KnownKey {
  const expiresAtMs = record.expiresAt === undefined ? undefined : Date.parse(record.expiresAt);
  return {
    record,
    hash: Buffer.from(record.secretHash, 'hex'),
    // An unreadable expiry counts as expired: fail closed.
    ...(expiresAtMs === undefined ? {} : { expiresAtMs: Number.isNaN(expiresAtMs) ? 0 : expiresAtMs }),
    ...(record.hosts ? { hosts: new Set(record.hosts) } : {}),
  };
}
