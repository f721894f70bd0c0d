import type Database from 'better-sqlite3';
import { StoreError } from '../errors.js';
import { ChangeListeners } from '../change-listeners.js';
import { OrganizationScopeHandle } from '../scoped.js';
import type { ChangeListener, Collection, Document, IndexSpec, OrganizationScope, Store } from '../types.js';
import type { EmbeddedBackend, Statements } from './backend.js';
import { EmbeddedCollection } from './collection.js';
import { DEFAULT_LOCK_TIMEOUT_MS, environmentFailure, isBusy, openDatabase, withBusyRetry, withoutBlocking } from './sqlite.js';

/** Reads may use an index definition this much later than another process created it (writes never do). */
const INDEX_DEFINITIONS_TTL_MS = 1_000;

function prepareStatements(db: Database.Database): Statements {
  return {
    documentById: db.prepare<[string, string], string>('SELECT doc FROM documents WHERE collection = ? AND id = ?').pluck(),
    documentsByKey: db
      .prepare<[string, string, string], string>(
        'SELECT d.doc FROM unique_keys u JOIN documents d ON d.collection = u.collection AND d.id = u.doc_id WHERE u.collection = ? AND u.index_name = ? AND u.key = ?',
      )
      .pluck(),
    scan: db.prepare<[string], string>('SELECT doc FROM documents WHERE collection = ? ORDER BY seq').pluck(),
    count: db.prepare<[string], number>('SELECT count(*) FROM documents WHERE collection = ?').pluck(),
    insertDocument: db.prepare<[string, string, string]>('INSERT INTO documents (collection, id, doc) VALUES (?, ?, ?)'),
    replaceDocument: db.prepare<[string, string, string]>('UPDATE documents SET doc = ? WHERE collection = ? AND id = ?'),
    deleteDocument: db.prepare<[string, string]>('DELETE FROM documents WHERE collection = ? AND id = ?'),
    insertKey: db.prepare<[string, string, string, string]>('INSERT INTO unique_keys (collection, index_name, key, doc_id) VALUES (?, ?, ?, ?)'),
    deleteKeys: db.prepare<[string, string]>('DELETE FROM unique_keys WHERE collection = ? AND doc_id = ?'),
    indexDefinitions: db.prepare<[string], { name: string; spec: string }>('SELECT name, spec FROM index_definitions WHERE collection = ?'),
    insertIndexDefinition: db.prepare<[string, string, string]>('INSERT INTO index_definitions (collection, name, spec) VALUES (?, ?, ?)'),
    bumpVersion: db.prepare<[string]>(
      'INSERT INTO collection_versions (collection, version) VALUES (?, 1) ON CONFLICT (collection) DO UPDATE SET version = version + 1',
    ),
    versions: db.prepare<[string], { collection: string; version: number }>(
      'SELECT collection, version FROM collection_versions WHERE collection IN (SELECT value FROM json_each(?)) ORDER BY collection',
    ),
  };
}

/** The embedded backend: one SQLite file shared by the primary, every worker and other servers on the host. */
export class EmbeddedStore implements Store, EmbeddedBackend {
  readonly backend = 'embedded' as const;
  readonly statements: Statements;
  private readonly collections = new Map<string, EmbeddedCollection<Document>>();
  private readonly indexCache = new Map<string, { specs: IndexSpec[]; loadedAt: number }>();
  private readonly listeners = new ChangeListeners();
  private closed = false;

  private constructor(
    readonly file: string,
    readonly db: Database.Database,
    /** How long an operation waits for another process's lock before failing with `store_busy`. */
    private readonly lockTimeoutMs: number,
  ) {
    this.statements = prepareStatements(db);
  }

  static async open(file: string, options: { lockTimeoutMs?: number } = {}): Promise<EmbeddedStore> {
    return new EmbeddedStore(file, await openDatabase(file), options.lockTimeoutMs ?? DEFAULT_LOCK_TIMEOUT_MS);
  }

  collection<T extends Document = Document>(name: string): Collection<T> {
    let collection = this.collections.get(name);
    if (!collection) {
      collection = new EmbeddedCollection(name, this);
      this.collections.set(name, collection);
    }
    return collection as unknown as Collection<T>;
  }

  forOrganization(organizationId: string): OrganizationScope {
    return new OrganizationScopeHandle(this, organizationId);
  }

  async changeToken(collections: readonly string[]): Promise<string> {
    const rows = await this.retried(() => this.statements.versions.all(JSON.stringify(collections)));
    return rows.map((row) => `${row.collection}:${row.version}`).join(',');
  }

  onChange(listener: ChangeListener): () => void {
    return this.listeners.add(listener);
  }

  /** Index definitions for reads: cached briefly, since a missing one only costs a scan. */
  indexesForRead(collection: string): IndexSpec[] {
    const cached = this.indexCache.get(collection);
    if (cached && Date.now() - cached.loadedAt < INDEX_DEFINITIONS_TTL_MS) return cached.specs;
    return this.indexesForWrite(collection);
  }

  /** Index definitions inside a write transaction: always current, so every process maintains every index. */
  indexesForWrite(collection: string): IndexSpec[] {
    const specs = this.statements.indexDefinitions.all(collection).map((row) => JSON.parse(row.spec) as IndexSpec);
    this.indexCache.set(collection, { specs, loadedAt: Date.now() });
    return specs;
  }

  /** Runs a read at once; only when another process holds a lock does it become an async retry. */
  read<T>(operation: () => T): T | Promise<T> {
    this.assertOpen();
    try {
      return operation();
    } catch (error) {
      if (!isBusy(error)) throw environmentFailure(error, this.file);
      return this.retried(operation);
    }
  }

  /** `operation` retried while another process holds a lock, its environment failures translated. */
  private async retried<T>(operation: () => T): Promise<T> {
    try {
      // The first attempt may wait briefly in SQLite (ordinary contention), later ones never block.
      let attempts = 0;
      return await withBusyRetry(() => (attempts++ === 0 ? operation() : withoutBlocking(this.db, operation)), this.lockTimeoutMs);
    } catch (error) {
      throw environmentFailure(error, this.file);
    }
  }

  /**
   * Runs `operation` in a `BEGIN IMMEDIATE` transaction: the write lock is taken before anything is read, so a
   * read-modify-write (`$inc`, `$push`, unique checks) never races another process and never has to upgrade a
   * read lock (which SQLite can only refuse with SQLITE_BUSY). Every write attempt bumps the collection's counter
   * (SPEC 7.1, the store contract): in the same transaction when it commits, in one of its own when it fails,
   * so caches in every process drop what they hold whatever the outcome. `counts: false` (index creation)
   * leaves the counter alone.
   */
  async write<T>(collection: string, operation: () => { result: T; counts: boolean }): Promise<T> {
    this.assertOpen();
    let outcome: { result: T; counts: boolean };
    try {
      outcome = await this.retried(() =>
        this.db
          .transaction(() => {
            const attempt = operation();
            if (attempt.counts) this.statements.bumpVersion.run(collection);
            return attempt;
          })
          .immediate(),
      );
    } catch (error) {
      // A write refused for the lock changed nothing, and its bump would wait for the same lock: the caller
      // hears of the refusal now, the bump follows when it can.
      const bumped = this.bumpAfterFailure(collection);
      if (!(error instanceof StoreError && error.code === 'store_busy')) await bumped;
      throw error;
    }
    if (outcome.counts) this.listeners.notify(collection);
    return outcome.result;
  }

  /** A failed write rolled back; bumping anyway keeps one rule for both backends. Best effort: the write failed. */
  private async bumpAfterFailure(collection: string): Promise<void> {
    if (this.closed) return;
    try {
      await this.retried(() => this.statements.bumpVersion.run(collection));
      this.listeners.notify(collection);
    } catch {
      // The caller hears about the write's own failure.
    }
  }


  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.db.close();
  }

  private assertOpen(): void {
    if (this.closed) throw new StoreError('the store is closed', 'store_closed');
  }
}
