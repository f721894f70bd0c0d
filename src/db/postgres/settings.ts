import type { ClientConfig, PoolConfig } from 'pg';
import { StoreError } from '../errors.js';

/**
 * The oldest server accepted: the oldest line the PostgreSQL project still maintains. Nothing newer than 9.5 is
 * used (jsonb containment, `ON CONFLICT`, identity columns from 10); the test suite runs on Debian's 15.
 */
export const MIN_SERVER_VERSION = 14;

/** The PostgreSQL settings of the resolved configuration (`postgres.*`). */
export interface PostgresSettings {
  url: string;
  /** Connections of one process (the primary and each worker), see docs/postgres.md for the budget. */
  maxPoolSize: number;
  /** How long opening a connection may take before the operation fails with 503 store_unavailable. */
  connectTimeoutMs: number;
  /** Server-side limit of each wait for a collection's write lock (each statement gets a second more). */
  operationTimeoutMs: number;
}

export const DEFAULT_POSTGRES_SETTINGS: Omit<PostgresSettings, 'url'> = {
  maxPoolSize: 4,
  connectTimeoutMs: 5_000,
  operationTimeoutMs: 5_000,
};

/** Connection strings may carry a password; it never reaches a message. */
export function redactCredentials(text: string): string {
  return text.replace(/\/\/[^@/\s]*@/g, '//***@').replace(/(password=)[^&\s]*/gi, '$1***');
}

/** `postgres://` or `postgresql://` with a host: anything else is refused before a connection is tried. */
export function assertConnectionString(url: string): void {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new StoreError(`postgres.url is not a connection string (postgres://user:password@host:5432/database): ${redactCredentials(url)}`, 'store_misconfigured');
  }
  if (parsed.protocol !== 'postgres:' && parsed.protocol !== 'postgresql:') {
    throw new StoreError(`postgres.url must start with postgres:// or postgresql:// (got ${parsed.protocol}//)`, 'store_misconfigured');
  }
}

/** The database and host a connection string names, for messages: `"fleet" on db.example:5432`. */
export function describeConnection(url: string): string {
  try {
    const parsed = new URL(url);
    const database = decodeURIComponent(parsed.pathname.replace(/^\//, '')) || decodeURIComponent(parsed.username) || 'postgres';
    return `"${database}" on ${parsed.host || 'localhost'}`;
  } catch {
    return 'the configured database';
  }
}

/**
 * Pool options: at most `maxPoolSize` connections, bounded waits everywhere. The server enforces the statement
 * and lock limits; the client's own read limit (a little later) catches a server that no longer answers at all
 * (stopped, or cut off without a reset), and an abandoned transaction cannot hold a collection's lock forever.
 */
export function poolOptions(settings: PostgresSettings): PoolConfig {
  return {
    connectionString: settings.url,
    application_name: 'fleetplane',
    max: settings.maxPoolSize,
    connectionTimeoutMillis: settings.connectTimeoutMs,
    idleTimeoutMillis: 30_000,
    keepAlive: true,
    // A statement's limit is a second past the lock's, so that a write stuck behind another one is reported as
    // such (store_busy) rather than as a statement that ran out of time.
    lock_timeout: settings.operationTimeoutMs,
    statement_timeout: settings.operationTimeoutMs + 1_000,
    idle_in_transaction_session_timeout: Math.max(10_000, 2 * settings.operationTimeoutMs),
    query_timeout: settings.operationTimeoutMs + 3_000,
  };
}

/**
 * The longest one operation takes, from asking the pool for a connection to its last statement's answer: the
 * longer of the connect and lock limits, and the client's read allowance past them. A server that hangs with its
 * sockets open (frozen, or cut off without a reset) gets 503 store_unavailable this late: 8 s by default.
 */
export function operationDeadlineMs(settings: Pick<PostgresSettings, 'connectTimeoutMs' | 'operationTimeoutMs'>): number {
  return Math.max(settings.connectTimeoutMs, settings.operationTimeoutMs) + 3_000;
}

/**
 * TCP keepalive of the listening connection: idle this long, then probes a second apart, ten of them (libuv's
 * fixed interval and count). A connection cut without a reset (a partition, a host gone) is noticed within about
 * 12 s without a query; then the caches read the counters again.
 */
export const LISTENER_KEEPALIVE_MS = 2_000;

/** The change feed's own connection (change-feed.ts): the pool's limits, no pool, and a short keepalive. */
export function listenerOptions(settings: PostgresSettings): ClientConfig {
  const { max: _max, idleTimeoutMillis: _idle, ...client } = poolOptions(settings);
  return { ...client, application_name: 'fleetplane-changes', keepAliveInitialDelayMillis: LISTENER_KEEPALIVE_MS };
}
