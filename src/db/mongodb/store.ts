import { setTimeout as sleep } from 'node:timers/promises';
import { MongoClient, type ClientSession, type Db, type Document as DriverDocument } from 'mongodb';
import { StoreError, StoreUnavailableError } from '../errors.js';
import { counterToken } from '../change-feed.js';
import { ChangeListeners } from '../change-listeners.js';
import { OrganizationScopeHandle } from '../scoped.js';
import type { ChangeListener, Collection, Document, OrganizationScope, Store } from '../types.js';
import { MongoChangeFeed } from './change-feed.js';
import { MongoCollection } from './collection.js';
import { redactCredentials, toStoreError } from './errors.js';
import { assertSupportedServer, clientOptions, databaseName, DEFAULT_MONGO_SETTINGS, type MongoSettings } from './settings.js';

/** Per-collection write counters, the MongoDB twin of the embedded `collection_versions` table. */
export const VERSIONS_COLLECTION = 'fleetplane_collection_versions';

type Counter = { _id: string; version: number };
const NAMESPACE_EXISTS = 48;

/** What the store needs of a connected client; tests hand in a fake `Db`. */
export interface MongoConnection {
  readonly db: Db;
  startSession(): ClientSession;
  close(): Promise<void>;
}

/**
 * The MongoDB backend (official driver), used when `mongodb.url` is configured. Every write runs in a
 * transaction that first bumps its collection's counter: the counter and the data commit together (SPEC 7.1),
 * and two writes to one collection conflict on the counter, so they are serialized as on the embedded store —
 * which makes read-modify-write steps (the size check after an update, an upsert's "nothing matched") safe
 * under concurrency. A write that fails for any reason bumps the counter once more on its own: if its outcome
 * is unknown (an unacknowledged commit), caches must not keep what they hold.
 */
export class MongoStore implements Store {
  readonly backend = 'mongodb' as const;
  private readonly collections = new Map<string, MongoCollection<Document>>();
  private readonly listeners = new ChangeListeners();
  private readonly counters = new Set<string>();
  /** Change streams on the counters (change-feed.ts), when connected to a server; absent otherwise. */
  private readonly feed: MongoChangeFeed | undefined;

  constructor(
    private readonly connection: MongoConnection,
    private readonly settings: Pick<MongoSettings, 'operationTimeoutMs'> = DEFAULT_MONGO_SETTINGS,
    options: { changeFeed?: { maxAwaitTimeMs: number } } = {},
  ) {
    this.feed = options.changeFeed
      ? new MongoChangeFeed(() => this.versions(), (collection) => this.listeners.notify(collection), options.changeFeed.maxAwaitTimeMs)
      : undefined;
  }

  /** Connects, then checks the server's version and topology (see `assertSupportedServer`). */
  static async connect(settings: Pick<MongoSettings, 'url' | 'database'> & Partial<MongoSettings>): Promise<MongoStore> {
    const resolved: MongoSettings = { ...DEFAULT_MONGO_SETTINGS, ...settings };
    let client: MongoClient;
    try {
      client = new MongoClient(resolved.url, clientOptions(resolved));
      await client.connect();
    } catch (error) {
      const message = `cannot connect to MongoDB: ${redactCredentials((error as Error).message)}`;
      // Unreachable is worth retrying; a bad connection string or refused credentials are not.
      if (toStoreError('connection', error) instanceof StoreUnavailableError) throw new StoreUnavailableError(message, { cause: error });
      throw new StoreError(message, 'store_misconfigured', { cause: error });
    }
    const db = client.db(databaseName(resolved));
    try {
      await assertSupportedServer(db);
    } catch (error) {
      await client.close().catch(() => undefined);
      throw toStoreError(db.databaseName, error);
    }
    return new MongoStore({ db, startSession: () => client.startSession(), close: () => client.close() }, resolved, {
      changeFeed: { maxAwaitTimeMs: Math.min(5_000, Math.floor(resolved.socketTimeoutMs / 2)) },
    });
  }

  collection<T extends Document = Document>(name: string): Collection<T> {
    let collection = this.collections.get(name);
    if (!collection) {
      collection = new MongoCollection(name, this.connection.db.collection<DriverDocument & { _id: string }>(name), this, this.settings.operationTimeoutMs);
      this.collections.set(name, collection);
    }
    return collection as unknown as Collection<T>;
  }

  forOrganization(organizationId: string): OrganizationScope {
    return new OrganizationScopeHandle(this, organizationId);
  }

  /** Without a query while the change stream is open; read from the counters otherwise (and then remembered). */
  async changeToken(collections: readonly string[]): Promise<string> {
    this.feed?.start();
    const heard = this.feed?.counters.token(collections);
    if (heard !== undefined) return heard;
    let rows: Counter[];
    try {
      rows = await this.versions().find({ _id: { $in: [...collections] } }, { sort: { _id: 1 }, maxTimeMS: this.settings.operationTimeoutMs }).toArray();
    } catch (error) {
      throw toStoreError(VERSIONS_COLLECTION, error);
    }
    const versions = new Map(rows.map((row) => [row._id, row.version]));
    this.feed?.counters.learn(collections, versions);
    return counterToken(collections, (collection) => versions.get(collection) ?? 0);
  }

  /** Writes through this instance at once; other processes' and hosts' as they commit, through the change stream. */
  onChange(listener: ChangeListener): () => void {
    this.feed?.start();
    return this.listeners.add(listener);
  }

  async close(): Promise<void> {
    await this.feed?.close();
    await this.connection.close();
  }

  /**
   * Runs `operation` in a transaction that bumps `collection`'s counter first; retried (a write conflict, a
   * primary stepping down) until `operationTimeoutMs` has passed. Any failure bumps the counter again, best effort.
   */
  async write<T>(collection: string, operation: (session: ClientSession) => Promise<T>): Promise<T> {
    try {
      await this.ensureCounter(collection);
      const result = await this.inTransaction(collection, operation);
      this.counted(collection);
      return result;
    } catch (error) {
      await this.bumpAfterFailure(collection);
      throw toStoreError(collection, error);
    }
  }

  private async inTransaction<T>(collection: string, operation: (session: ClientSession) => Promise<T>): Promise<T> {
    const deadline = Date.now() + this.settings.operationTimeoutMs;
    const session = this.connection.startSession();
    try {
      for (let attempt = 0; ; attempt += 1) {
        session.startTransaction({ readPreference: 'primary', readConcern: { level: 'snapshot' }, writeConcern: { w: 'majority' }, maxCommitTimeMS: this.settings.operationTimeoutMs });
        try {
          await this.versions().updateOne({ _id: collection }, { $inc: { version: 1 } }, { session });
          const result = await operation(session);
          await session.commitTransaction();
          return result;
        } catch (error) {
          if (session.inTransaction()) await session.abortTransaction().catch(() => undefined);
          const transient = (error as { hasErrorLabel?: (label: string) => boolean }).hasErrorLabel?.('TransientTransactionError') === true;
          if (!transient || Date.now() >= deadline) throw error;
          // Another writer of the same collection holds its counter: back off briefly, with jitter.
          await sleep(Math.min(100, 2 ** attempt) + Math.random() * 10);
        }
      }
    } finally {
      await session.endSession().catch(() => undefined);
    }
  }

  /**
   * The collection and its counter exist before any transaction uses them: concurrent first writers then
   * conflict instead of colliding, and no transaction has to create a collection (which a sharded cluster
   * refuses when another shard takes part in it).
   */
  private async ensureCounter(collection: string): Promise<void> {
    if (this.counters.has(collection)) return;
    try {
      await this.connection.db.createCollection(collection);
    } catch (error) {
      if ((error as { code?: unknown }).code !== NAMESPACE_EXISTS) throw error;
    }
    try {
      await this.versions().updateOne({ _id: collection }, { $setOnInsert: { version: 0 } }, { upsert: true });
    } catch (error) {
      // Two processes creating the same counter at once: the loser finds it created.
      if ((error as { code?: unknown }).code !== 11000) throw error;
    }
    this.counters.add(collection);
  }

  private async bumpAfterFailure(collection: string): Promise<void> {
    try {
      await this.versions().updateOne({ _id: collection }, { $inc: { version: 1 } }, { upsert: true });
      this.counted(collection);
    } catch {
      // The store is most likely down; caches fall back on their maximum age. The caller hears the write's error.
    }
  }


  /** A committed bump: this process's caches hear of it at once; the counter's new value is read when next asked. */
  private counted(collection: string): void {
    this.feed?.counters.wrote(collection);
    this.listeners.notify(collection);
  }

  private versions() {
    return this.connection.db.collection<Counter>(VERSIONS_COLLECTION);
  }
}
