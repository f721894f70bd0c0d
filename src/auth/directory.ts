import type { KeyDocument, OrganizationDocument } from '../db/documents.js';
import type { Store } from '../db/types.js';
import { StoreCache, type StoreCacheOptions } from '../db/store-cache.js';
import { platformOrganizationId } from './organizations.js';

const WATCHED = ['organizations', 'keys'] as const;

/** A key record as authorization uses it: hash decoded, expiry parsed, hosts as a set. */
export interface KnownKey {
  record: KeyDocument;
  hash: Buffer;
  expiresAtMs?: number;
  hosts?: ReadonlySet<string>;
  /**
   * The secret last seen to match `hash`, kept while this entry is cached so a key's next request is checked
   * by a constant-time comparison instead of a hash. It lives only in this process's memory, as every
   * presented key does while its request is served; the store keeps the hash only.
   */
  verifiedSecret?: string;
}

/** Staleness bound, cap and clock of the directory's cache (see `StoreCache`), and the configured platform organization. */
export type DirectoryOptions = StoreCacheOptions & { platformOrganization?: string };

/** Key ids remembered past the cache (see `TenantDirectory.remembersKey`). */
const KNOWN_IDS = 10_000;

/** Cache entry of the platform organization's id; host names never contain a NUL. */
const PLATFORM_ENTRY = '\0platform';

/**
 * Organizations by host and keys by id, cached per process through a `StoreCache` over the `organizations` and
 * `keys` collections: a revoked key or a moved host stops working in every worker within `revalidateMs`.
 */
export class TenantDirectory {
  private readonly organizations: StoreCache;
  private readonly keys: StoreCache;
  /** The id of every key in the store, one entry read whole again only after a write to `keys` (see `keyExists`). */
  private readonly keyIds: StoreCache;
  private readingKeyIds: Promise<ReadonlySet<string>> | undefined;

  private readonly configuredPlatform: string | undefined;
  /**
   * Ids of keys this process has read a record of, kept when the cache is emptied (by any write to the watched
   * collections, or by its maximum age): while an address is over its failure limit, such an id may still be
   * read from the store, so a key in use is not locked out by a flood of made-up ones that spend the reads.
   */
  private readonly knownIds = new Set<string>();

  constructor(
    private readonly store: Store,
    options: DirectoryOptions = {},
  ) {
    this.configuredPlatform = options.platformOrganization;
    // Either kind of change invalidates both: a key's organization may have moved hosts, and vice versa.
    this.organizations = new StoreCache(store, WATCHED, options);
    this.keys = new StoreCache(store, WATCHED, options);
    this.keyIds = new StoreCache(store, ['keys'], options);
  }

  organizationForHost(host: string): Promise<OrganizationDocument | null> {
    return this.organizations.get(host, () => this.store.collection<OrganizationDocument>('organizations').findOne({ hosts: host }));
  }

  /** The organization of `host` when the cache answers without waiting (see `StoreCache.peek`). */
  cachedOrganization(host: string): OrganizationDocument | null | undefined {
    return this.organizations.peek(host);
  }

  /** SPEC 8.4: the id of the organization that owns this server (null on a store with no organization yet). */
  platformOrganization(): Promise<string | null> {
    return this.organizations.get(PLATFORM_ENTRY, () => platformOrganizationId(this.store, this.configuredPlatform));
  }

  /** The platform organization's id when the cache answers without waiting. */
  cachedPlatformOrganization(): string | null | undefined {
    return this.organizations.peek(PLATFORM_ENTRY);
  }

  key(keyId: string): Promise<KnownKey | null> {
    return this.keys.get(keyId, async () => {
      const record = await this.store.collection<KeyDocument>('keys').findOne({ _id: keyId });
      if (record) this.rememberId(keyId);
      return record ? toKnownKey(record) : null;
    });
  }

  /** The key `keyId` when the cache answers without waiting (see `StoreCache.peek`). */
  cachedKey(keyId: string): KnownKey | null | undefined {
    return this.keys.peek(keyId);
  }

  /**
   * Whether the cache holds an answer for `keyId` (its record or "no such key"), however stale, or this process
   * has read a record of it before: what may still be checked while the caller's address is over its
   * failed-authentication limit.
   */
  remembersKey(keyId: string): boolean {
    return this.keys.has(keyId) || this.knownIds.has(keyId);
  }

  /**
   * Whether the store holds a key with this id, by the list of every key's id: read whole once, and again only
   * after a write to `keys` (or the cache's maximum age), however many ids are asked about and however fast;
   * concurrent askers share one read. While an address is over its failure limit this is what lets a key this
   * process never read still check out, at a cost a flood of made-up ids cannot raise (SPEC 8.7).
   */
  async keyExists(keyId: string): Promise<boolean> {
    const ids = await this.keyIds.get('ids', () => {
      this.readingKeyIds ??= this.store
        .collection<KeyDocument>('keys')
        .find({}, { projection: { _id: 1 } })
        .then((records) => new Set(records.map((record) => record._id)))
        .finally(() => (this.readingKeyIds = undefined));
      return this.readingKeyIds;
    });
    return ids.has(keyId);
  }

  private rememberId(keyId: string): void {
    if (this.knownIds.has(keyId)) return;
    // As many as the cache holds; the oldest is forgotten first.
    if (this.knownIds.size >= KNOWN_IDS) this.knownIds.delete(this.knownIds.values().next().value!);
    this.knownIds.add(keyId);
  }

  /** SPEC 5.5: an inactive organization's hosts and keys are released from this process's cache. */
  forgetOrganization(organizationId: string): void {
    this.organizations.deleteWhere((_host, value) => (value as OrganizationDocument | null)?._id === organizationId);
    this.keys.deleteWhere((_id, value) => (value as KnownKey | null)?.record.organization_id === organizationId);
  }

  close(): void {
    this.organizations.close();
    this.keys.close();
    this.keyIds.close();
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
