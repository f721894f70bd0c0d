import pg from 'pg';
import { StoreError } from '../errors.js';
import { ChangeListeners } from '../change-listeners.js';
import { OrganizationScopeHandle } from '../scoped.js';
import type { ChangeListener, Collection, Document, IndexSpec, OrganizationScope, Store } from '../types.js';
import { counterToken } from '../change-feed.js';
import { CHANNEL_SQL, PostgresChangeFeed } from './change-feed.js';
import { PostgresCollection, type PostgresBackend, type Queryable } from './collection.js';
import { connectError, isUnreachable, toStoreError } from './errors.js';
import { assertSupportedServer, ensureSchema } from './schema.js';
import { withinDeadline, tearDown, type Cutoff } from './deadline.js';
import { assertConnectionString, DEFAULT_POSTGRES_SETTINGS, describeConnection, listenerOptions, operationDeadlineMs, poolOptions, type PostgresSettings } from './settings.js';

/** Reads may use an index definition this much later than another process created it (writes never do). */
const INDEX_DEFINITIONS_TTL_MS = 1_000;
/** A notification's payload holds at most 8000 bytes; a longer collection name is notified as `*` (change-feed.ts). */
const MAX_NOTIFIED_NAME_BYTES = 1_000;

/**
 * Takes the collection's write lock and counts the write in one statement: the upsert locks the collection's
 * counter row until the transaction ends, so a second writer of the collection — in this process or on another
 * host — waits here (at most `lock_timeout`, then 503 store_busy) and, READ COMMITTED taking a new snapshot per
 * statement, reads what the first one committed. A row lock rather than `pg_advisory_xact_lock`: the same
 * round trip bumps the counter caches compare, and the counter commits with the data or not at all. The same
 * statement notifies the change feeds of every process (change-feed.ts) with the counter's new value: PostgreSQL
 * delivers a notification only when its transaction commits, so a rolled-back write is never announced.
 */
const LOCK_AND_COUNT = `WITH counted AS (
  INSERT INTO fleetplane_collection_versions (collection, version) VALUES ($1, 1)
  ON CONFLICT (collection) DO UPDATE SET version = fleetplane_collection_versions.version + 1 RETURNING version
)
SELECT version::text AS version, pg_notify(${CHANNEL_SQL}, CASE WHEN octet_length($1::text) <= ${MAX_NOTIFIED_NAME_BYTES} THEN version::text || ' ' || $1::text ELSE '*' END) FROM counted`;
/** The same lock without counting (index creation, which every process runs at start). */
const LOCK_ONLY =
  'INSERT INTO fleetplane_collection_versions (collection, version) VALUES ($1, 0) ON CONFLICT (collection) DO UPDATE SET version = fleetplane_collection_versions.version';

/**
 * The PostgreSQL backend (`pg`), used when `postgres.url` is configured: documents in jsonb, at most
 * `maxPoolSize` connections per process. Every write runs in a transaction that first takes its collection's
 * lock (see `LOCK_AND_COUNT`), which makes read-modify-write steps (`$inc`, unique keys, an upsert's "nothing
 * matched", the size check after an update) safe across processes and hosts; `updateMany` and `deleteMany` are
 * all-or-nothing. A write that fails for any reason bumps the counter once more on its own, as on the other
 * backends: if its outcome is unknown (the connection lost at commit), caches must not keep what they hold.
 */
export class PostgresStore implements Store, PostgresBackend {
  readonly backend = 'postgres' as const;
  private readonly collections = new Map<string, PostgresCollection<Document>>();
  private readonly indexCache = new Map<string, { specs: IndexSpec[]; loadedAt: number }>();
  private readonly listeners = new ChangeListeners();
  private readonly bumping = new Set<string>();
  /** The longest an operation takes, from asking for a connection to its last answer (see `operationDeadlineMs`). */
  private readonly deadlineMs: number;
  /** Absent when the store was opened without one: every change token is then read from the counters. */
  readonly feed: PostgresChangeFeed | undefined;
  private closed = false;

  private constructor(
    readonly pool: pg.Pool,
    settings: PostgresSettings,
    changeFeed: boolean,
  ) {
    this.deadlineMs = operationDeadlineMs(settings);
    this.feed = changeFeed
      ? new PostgresChangeFeed({ client: () => new pg.Client(listenerOptions(settings)), changed: (collection) => this.listeners.notify(collection) })
      : undefined;
  }

  /**
   * Connects, checks the server's version and creates the tables when missing (see schema.ts). `changeFeed:
   * false` leaves caches polling the counters (a benchmark's baseline; a pooler that cannot LISTEN).
   */
  static async connect(settings: Pick<PostgresSettings, 'url'> & Partial<PostgresSettings>, options: { changeFeed?: boolean } = {}): Promise<PostgresStore> {
    const resolved: PostgresSettings = { ...DEFAULT_POSTGRES_SETTINGS, ...settings };
    assertConnectionString(resolved.url);
    const where = describeConnection(resolved.url);
    let pool: pg.Pool;
    try {
      pool = new pg.Pool(poolOptions(resolved));
    } catch (error) {
      throw connectError(where, error);
    }
    // An idle connection the server drops (a restart, a network cut) reports here; without a listener the
    // process would crash. The next operation opens a new connection.
    pool.on('error', () => undefined);
    try {
      const client = await pool.connect();
      client.on('error', () => undefined);
      try {
        await assertSupportedServer(client);
        await ensureSchema(client);
      } finally {
        client.release();
      }
    } catch (error) {
      await pool.end().catch(() => undefined);
      throw connectError(where, error);
    }
    return new PostgresStore(pool, resolved, options.changeFeed ?? true);
  }

  collection<T extends Document = Document>(name: string): Collection<T> {
    let collection = this.collections.get(name);
    if (!collection) {
      collection = new PostgresCollection(name, this);
      this.collections.set(name, collection);
    }
    return collection as unknown as Collection<T>;
  }

  forOrganization(organizationId: string): OrganizationScope {
    return new OrganizationScopeHandle(this, organizationId);
  }

  /** Without a query while the change feed is live; read from the counters otherwise (and then remembered). */
  async changeToken(collections: readonly string[]): Promise<string> {
    this.feed?.start();
    const heard = this.feed?.counters.token(collections);
    if (heard !== undefined) return heard;
    const { rows } = await this.read('fleetplane_collection_versions', (db) =>
      db.query<{ collection: string; version: string }>('SELECT collection, version::text AS version FROM fleetplane_collection_versions WHERE collection = ANY($1::text[])', [
        [...collections],
      ]),
    );
    const versions = new Map(rows.map((row) => [row.collection, Number(row.version)]));
    this.feed?.counters.learn(collections, versions);
    return counterToken(collections, (collection) => versions.get(collection) ?? 0);
  }

  /** Writes through this instance at once; other processes' and hosts' as they commit, through the change feed. */
  onChange(listener: ChangeListener): () => void {
    this.feed?.start();
    return this.listeners.add(listener);
  }

  /** Runs a read on a pooled connection within the operation deadline, its failures translated. */
  async read<T>(collection: string, operation: (db: Queryable) => Promise<T>): Promise<T> {
    this.assertOpen();
    try {
      return await withinDeadline(this.deadlineMs, collection, (cutoff) => this.onConnection(cutoff, operation));
    } catch (error) {
      throw toStoreError(collection, error);
    }
  }

  /**
   * `operation` on a connection of the pool; past the deadline the connection is torn down (its statement fails
   * at once and its slot frees) and one handed over too late goes straight back.
   */
  private async onConnection<T>(cutoff: Cutoff, operation: (db: pg.PoolClient, markBroken: () => void) => Promise<T>): Promise<T> {
    const client = await this.pool.connect();
    if (cutoff.expired) {
      client.release();
      throw cutoff.error;
    }
    // A connection that fails while checked out reports here too (the failed query rejects as well).
    const ignore = () => undefined;
    client.on('error', ignore);
    cutoff.onExpire(() => tearDown(client));
    let broken = false;
    try {
      return await operation(client, () => (broken = true));
    } catch (error) {
      broken ||= cutoff.expired || isUnreachable(error);
      throw error;
    } finally {
      client.removeListener('error', ignore);
      // A connection in an unknown state is closed rather than handed to the next operation.
      client.release(broken);
    }
  }

  /** Index definitions for reads: cached briefly, since a missing one only costs a wider selection. */
  async indexesForRead(collection: string): Promise<IndexSpec[]> {
    const cached = this.indexCache.get(collection);
    if (cached && Date.now() - cached.loadedAt < INDEX_DEFINITIONS_TTL_MS) return cached.specs;
    return this.read(collection, (db) => this.indexesForWrite(db, collection));
  }

  /** Index definitions inside a write transaction (after the lock): always current, so every process maintains every index. */
  async indexesForWrite(db: Queryable, collection: string): Promise<IndexSpec[]> {
    const { rows } = await db.query<{ spec: string }>('SELECT spec FROM fleetplane_indexes WHERE collection = $1 ORDER BY name COLLATE "C"', [collection]);
    const specs = rows.map((row) => JSON.parse(row.spec) as IndexSpec);
    this.indexCache.set(collection, { specs, loadedAt: Date.now() });
    return specs;
  }

  forgetIndexes(collection: string): void {
    this.indexCache.delete(collection);
  }

  /**
   * Runs `operation` in a transaction holding `collection`'s write lock, counting the write unless `counts` is
   * false (see `LOCK_AND_COUNT`); listeners hear of it once committed.
   */
  async write<T>(collection: string, counts: boolean, operation: (db: Queryable) => Promise<T>): Promise<T> {
    this.assertOpen();
    let result: T;
    let version: number | undefined;
    try {
      ({ result, version } = await withinDeadline(this.deadlineMs, collection, (cutoff) => this.onConnection(cutoff, (client, markBroken) => this.inTransaction(client, markBroken, counts, collection, operation))));
    } catch (error) {
      const failure = toStoreError(collection, error);
      // A write refused for the lock changed nothing, and its bump would wait for the same lock; a store that is
      // away would hold the bump as long as the write: the caller hears of the failure now, the bump follows
      // when it can.
      const bumped = this.bumpAfterFailure(collection);
      if (!(failure instanceof StoreError && failure.statusCode === 503)) await bumped;
      throw failure;
    }
    if (counts) this.counted(collection, version);
    return result;
  }

  /** A committed bump of `collection`'s counter to `version`: this process's caches hear of it at once. */
  private counted(collection: string, version: number | undefined): void {
    this.feed?.counters.wrote(collection, version);
    this.listeners.notify(collection);
  }

  private async inTransaction<T>(client: pg.PoolClient, markBroken: () => void, counts: boolean, collection: string, operation: (db: Queryable) => Promise<T>): Promise<{ result: T; version?: number }> {
    await client.query('BEGIN');
    try {
      const locked = await client.query<{ version?: string }>(counts ? LOCK_AND_COUNT : LOCK_ONLY, [collection]);
      const result = await operation(client);
      await client.query('COMMIT');
      return { result, version: counts ? Number(locked.rows[0]!.version) : undefined };
    } catch (error) {
      if (isUnreachable(error) || !(await client.query('ROLLBACK').then(() => true, () => false))) markBroken();
      throw error;
    }
  }

  /** A failed write rolled back (or its outcome is unknown): bumping anyway keeps one rule for every backend. */
  private async bumpAfterFailure(collection: string): Promise<void> {
    // One at a time per collection: while the store is away every write fails, and one bump after them all is
    // as good as one each.
    if (this.closed || this.bumping.has(collection)) return;
    this.bumping.add(collection);
    try {
      const { rows } = await this.pool.query<{ version: string }>(LOCK_AND_COUNT, [collection]);
      this.counted(collection, Number(rows[0]!.version));
    } catch {
      // The store is most likely down; caches fall back on their maximum age. The caller hears the write's error.
    } finally {
      this.bumping.delete(collection);
    }
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.feed?.close();
    await this.pool.end();
  }

  private assertOpen(): void {
    if (this.closed) throw new StoreError('the store is closed', 'store_closed');
  }
}
