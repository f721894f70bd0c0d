import { closeSync, mkdirSync, openSync } from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import Database from 'better-sqlite3';
import { StoreError, StoreUnavailableError } from '../errors.js';

/**
 * better-sqlite3 is synchronous, so SQLite's busy handler blocks the event loop while it waits for the write
 * lock. Keep that wait short (ordinary contention between processes lasts a millisecond or two) and do longer
 * waits as async retries (`withBusyRetry`), which let the process keep serving while another process holds
 * the lock: each blocked attempt stalls every request of the process.
 */
const BUSY_TIMEOUT_MS = 20;
/** Opening the file (the switch to WAL) may wait on other processes opening it too. */
const OPEN_BUDGET_MS = 30_000;
/** How long an operation waits for another process's lock by default (`db.lockTimeoutMs`). */
export const DEFAULT_LOCK_TIMEOUT_MS = 5_000;
const SCHEMA_VERSION = 1;
/**
 * The most the -wal file keeps on disk once a checkpoint has let the log start over. Readers that never all
 * pause at once (long scans from many processes) keep the log from starting over, and it grows meanwhile
 * (259 MB in 40 minutes of such load); without a limit SQLite reuses the grown file and never gives the space
 * back.
 */
export const WAL_SIZE_LIMIT_BYTES = 64 * 1024 * 1024;

/**
 * One table holds every collection's documents as JSON text (`seq` keeps insertion order for scans).
 * Unique indexes live in a side table rather than in SQLite expression indexes, because a MongoDB unique index
 * is multikey: `organizations.hosts` must make each host in the array unique, which an index on
 * `json_extract(doc, '$.hosts')` (the whole array as one value) cannot express. Index definitions and
 * per-collection write counters are tables too, so every process sharing the file sees the same ones.
 */
const SCHEMA = `
CREATE TABLE IF NOT EXISTS documents (
  seq INTEGER PRIMARY KEY,
  collection TEXT NOT NULL,
  id TEXT NOT NULL,
  doc TEXT NOT NULL,
  UNIQUE (collection, id)
);
CREATE INDEX IF NOT EXISTS documents_by_collection ON documents (collection, seq);
CREATE TABLE IF NOT EXISTS unique_keys (
  collection TEXT NOT NULL,
  index_name TEXT NOT NULL,
  key TEXT NOT NULL,
  doc_id TEXT NOT NULL,
  PRIMARY KEY (collection, index_name, key)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS unique_keys_by_document ON unique_keys (collection, doc_id);
CREATE TABLE IF NOT EXISTS index_definitions (
  collection TEXT NOT NULL,
  name TEXT NOT NULL,
  spec TEXT NOT NULL,
  PRIMARY KEY (collection, name)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS collection_versions (
  collection TEXT PRIMARY KEY,
  version INTEGER NOT NULL
) WITHOUT ROWID;
`;

export function isBusy(error: unknown): boolean {
  const code = (error as { code?: unknown })?.code;
  return typeof code === 'string' && (code.startsWith('SQLITE_BUSY') || code.startsWith('SQLITE_LOCKED'));
}

export function isConstraint(error: unknown): boolean {
  const code = (error as { code?: unknown })?.code;
  return typeof code === 'string' && code.startsWith('SQLITE_CONSTRAINT');
}

function sqliteCode(error: unknown): string | undefined {
  const code = (error as { code?: unknown })?.code;
  return typeof code === 'string' && code.startsWith('SQLITE_') ? code : undefined;
}

/**
 * A failure of the environment (the disk is full, the file cannot be read or written) as the store error it
 * stands for, so the caller answers 503 with a clear reason instead of an internal error; anything else as it is.
 * A failed statement rolls its transaction back: a refused write was not made.
 */
export function environmentFailure(error: unknown, file: string): unknown {
  const code = sqliteCode(error);
  if (code === undefined) return error;
  if (code === 'SQLITE_FULL') return new StoreError(`the disk holding the embedded store ${file} is full: the write was not made`, 'store_full', { cause: error });
  if (code.startsWith('SQLITE_IOERR') || code.startsWith('SQLITE_CANTOPEN') || code.startsWith('SQLITE_READONLY') || code === 'SQLITE_PERM' || code === 'SQLITE_NOTADB' || code.startsWith('SQLITE_CORRUPT')) {
    return new StoreUnavailableError(`the embedded store ${file} cannot be read or written (${code}): ${(error as Error).message}`, { cause: error });
  }
  return error;
}

/**
 * `operation` run without SQLite's busy handler: a lock held by another process fails it at once instead of
 * blocking the event loop. Retries use it, since while a lock is held long every waiting operation retries and
 * their blocked attempts would add up to a stalled process.
 */
export function withoutBlocking<T>(db: Database.Database, operation: () => T): T {
  db.pragma('busy_timeout = 0');
  try {
    return operation();
  } finally {
    db.pragma(`busy_timeout = ${BUSY_TIMEOUT_MS}`);
  }
}

/**
 * Runs `operation` (a synchronous SQLite call), retrying while another connection holds the lock, with a
 * jittered backoff; only a lock held past the whole budget reaches the caller (503 `store_busy`).
 */
export async function withBusyRetry<T>(operation: () => T, budgetMs = DEFAULT_LOCK_TIMEOUT_MS): Promise<T> {
  const started = Date.now();
  for (let attempt = 0; ; attempt += 1) {
    try {
      return operation();
    } catch (error) {
      if (!isBusy(error)) throw error;
      if (Date.now() - started > budgetMs) throw new StoreError(`the database stayed locked by another process for more than ${budgetMs} ms`, 'store_busy', { cause: error });
      await sleep(Math.min(100, 2 ** attempt) + Math.random() * 10);
    }
  }
}

/** Opens (creating when needed) the SQLite file in WAL mode, safe for many processes at once. */
export async function openDatabase(file: string, { walSizeLimitBytes = WAL_SIZE_LIMIT_BYTES } = {}): Promise<Database.Database> {
  let db: Database.Database;
  try {
    mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
    // The store holds key hashes and provider secrets: a new file is the owner's only. SQLite gives its -wal
    // and -shm files the database file's mode. An existing file keeps the mode its operator chose.
    closeSync(openSync(file, 'a', 0o600));
    db = new Database(file, { timeout: BUSY_TIMEOUT_MS });
  } catch (error) {
    throw new StoreError(`cannot open the embedded store at ${file}: ${(error as Error).message}`, 'store_unavailable', { cause: error });
  }
  try {
    // WAL lets readers run while one process writes; switching to it needs a moment of exclusive access, which
    // another process opening the same new file may hold, hence the retry.
    await withBusyRetry(() => db.pragma('journal_mode = WAL'), OPEN_BUDGET_MS);
    // NORMAL in WAL mode never corrupts the file; a power loss may drop the last commits, not an app crash.
    db.pragma('synchronous = NORMAL');
    db.pragma(`journal_size_limit = ${walSizeLimitBytes}`);
    const version = db.pragma('user_version', { simple: true }) as number;
    if (version > SCHEMA_VERSION) throw new StoreError(`${file} was written by a newer version of fleetplane (schema ${version})`, 'schema_too_new');
    await withBusyRetry(() =>
      db.transaction(() => {
        db.exec(SCHEMA);
        db.pragma(`user_version = ${SCHEMA_VERSION}`);
      }).immediate(),
      OPEN_BUDGET_MS,
    );
    return db;
  } catch (error) {
    db.close();
    if (error instanceof StoreError) throw error;
    throw new StoreError(`cannot open the embedded store at ${file}: ${(error as Error).message}`, 'store_unavailable', { cause: error });
  }
}
