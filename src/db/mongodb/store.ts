import { MongoClient, type Db, type Document as DriverDocument } from 'mongodb';
import { StoreError } from '../errors.js';
import { OrganizationScopeHandle } from '../scoped.js';
import type { ChangeListener, Collection, Document, OrganizationScope, Store } from '../types.js';
import { MongoCollection } from './collection.js';
import { redactCredentials, toStoreError } from './errors.js';

/** Per-collection write counters, the MongoDB twin of the embedded `collection_versions` table. */
const VERSIONS_COLLECTION = 'fleetplane_collection_versions';

export interface MongoStoreOptions {
  url: string;
  database: string;
  /** How long to look for a reachable server before giving up (default: the connection string's, else the driver's). */
  serverSelectionTimeoutMs?: number;
}

/** The MongoDB backend (official driver), used when `mongodb.url` is configured. */
export class MongoStore implements Store {
  readonly backend = 'mongodb' as const;
  private readonly collections = new Map<string, MongoCollection<Document>>();
  private readonly listeners = new Set<ChangeListener>();

  private constructor(
    private readonly client: MongoClient,
    private readonly db: Db,
  ) {}

  static async connect(options: MongoStoreOptions): Promise<MongoStore> {
    let client: MongoClient;
    try {
      const timeout = options.serverSelectionTimeoutMs === undefined ? {} : { serverSelectionTimeoutMS: options.serverSelectionTimeoutMs };
      client = new MongoClient(options.url, { ignoreUndefined: true, appName: 'fleetplane', ...timeout });
      await client.connect();
    } catch (error) {
      throw new StoreError(`cannot connect to MongoDB: ${redactCredentials((error as Error).message)}`, 'store_unavailable', { cause: error });
    }
    return new MongoStore(client, client.db(options.database));
  }

  collection<T extends Document = Document>(name: string): Collection<T> {
    let collection = this.collections.get(name);
    if (!collection) {
      collection = new MongoCollection(name, this.db.collection<DriverDocument & { _id: string }>(name), (changed) => this.bump(changed));
      this.collections.set(name, collection);
    }
    return collection as unknown as Collection<T>;
  }

  forOrganization(organizationId: string): OrganizationScope {
    return new OrganizationScopeHandle(this, organizationId);
  }

  async changeToken(collections: readonly string[]): Promise<string> {
    try {
      const rows = await this.db
        .collection<{ _id: string; version: number }>(VERSIONS_COLLECTION)
        .find({ _id: { $in: [...collections] } })
        .sort({ _id: 1 })
        .toArray();
      return rows.map((row) => `${row._id}:${row.version}`).join(',');
    } catch (error) {
      throw toStoreError(VERSIONS_COLLECTION, error);
    }
  }

  onChange(listener: ChangeListener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  async close(): Promise<void> {
    await this.client.close();
  }

  /**
   * Counts a write after it happened; readers of `changeToken` may see the write a moment before the count, never
   * the count before the write, which is the order a cache needs.
   */
  private async bump(collection: string): Promise<void> {
    const versions = this.db.collection<{ _id: string; version: number }>(VERSIONS_COLLECTION);
    for (let attempt = 0; ; attempt += 1) {
      try {
        await versions.updateOne({ _id: collection }, { $inc: { version: 1 } }, { upsert: true });
        break;
      } catch (error) {
        // Two first writers upserting the same counter: one loses with a duplicate key and simply retries.
        if ((error as { code?: number }).code !== 11000 || attempt >= 2) throw toStoreError(VERSIONS_COLLECTION, error);
      }
    }
    for (const listener of this.listeners) {
      try {
        listener(collection);
      } catch {
        // A listener's failure is its own; the write has happened.
      }
    }
  }
}
