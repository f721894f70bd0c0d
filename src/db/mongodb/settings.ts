import type { Db, MongoClientOptions } from 'mongodb';
import { StoreError } from '../errors.js';

/** The oldest server this backend supports: transactions that create collections, `$`-free dotted field names. */
export const MIN_SERVER_VERSION = '5.0';
const DEFAULT_DATABASE = 'fleetplane';

/** The MongoDB settings of the resolved configuration (`mongodb.*`). */
export interface MongoSettings {
  url: string;
  /** Default: the connection string's database, else `fleetplane`. */
  database?: string;
  serverSelectionTimeoutMs: number;
  socketTimeoutMs: number;
  /** Server-side limit of each read (`maxTimeMS`) and deadline of each write transaction, retries included. */
  operationTimeoutMs: number;
  maxPoolSize: number;
}

export const DEFAULT_MONGO_SETTINGS: Omit<MongoSettings, 'url'> = {
  serverSelectionTimeoutMs: 5_000,
  socketTimeoutMs: 10_000,
  operationTimeoutMs: 5_000,
  maxPoolSize: 10,
};

/** The database a connection string names in its path (`mongodb://host/fleet?…` → `fleet`), if any. */
export function databaseInUrl(url: string): string | undefined {
  const path = /^mongodb(?:\+srv)?:\/\/[^/?]*\/([^?]*)/.exec(url)?.[1];
  return path ? decodeURIComponent(path) : undefined;
}

/** `mongodb.database` when configured, else the connection string's, else `fleetplane`. */
export function databaseName(settings: Pick<MongoSettings, 'url' | 'database'>): string {
  return settings.database ?? databaseInUrl(settings.url) ?? DEFAULT_DATABASE;
}

/**
 * Client options: bounded waits everywhere (an unreachable server fails an operation after the selection
 * timeout, a stalled one after the socket timeout) and primary reads, so a cache never reads a counter from one
 * member and a document from another that lags behind it.
 */
export function clientOptions(settings: MongoSettings): MongoClientOptions {
  return {
    appName: 'fleetplane',
    ignoreUndefined: true,
    serverSelectionTimeoutMS: settings.serverSelectionTimeoutMs,
    connectTimeoutMS: Math.min(settings.socketTimeoutMs, 10_000),
    socketTimeoutMS: settings.socketTimeoutMs,
    maxPoolSize: settings.maxPoolSize,
    readPreference: 'primary',
    retryWrites: true,
    retryReads: true,
  };
}

function versionBelow(version: string, minimum: string): boolean {
  const parts = version.split('.').map((part) => Number.parseInt(part, 10) || 0);
  const floor = minimum.split('.').map(Number);
  for (let i = 0; i < floor.length; i += 1) {
    if ((parts[i] ?? 0) !== floor[i]) return (parts[i] ?? 0) < floor[i]!;
  }
  return false;
}

/**
 * Refuses at boot what this backend cannot serve correctly: a server older than `MIN_SERVER_VERSION`, and a
 * standalone server, which has no transactions (multi-document writes are all-or-nothing only in a replica
 * set or a sharded cluster; a single-node replica set is enough).
 */
export async function assertSupportedServer(db: Db): Promise<{ version: string; topology: 'replicaSet' | 'sharded' }> {
  const admin = db.admin();
  const { version } = (await admin.command({ buildInfo: 1 })) as { version?: unknown };
  if (typeof version !== 'string') throw new StoreError('MongoDB did not report its version', 'store_unsupported');
  if (versionBelow(version, MIN_SERVER_VERSION)) {
    throw new StoreError(`MongoDB ${version} is too old: fleetplane needs MongoDB ${MIN_SERVER_VERSION} or later`, 'store_unsupported');
  }
  const hello = (await admin.command({ hello: 1 })) as { setName?: unknown; msg?: unknown };
  if (hello.msg === 'isdbgrid') return { version, topology: 'sharded' };
  if (typeof hello.setName !== 'string') {
    throw new StoreError(
      `MongoDB ${version} is a standalone server: fleetplane needs a replica set for its transactions ` +
        '(a single node will do: start mongod with --replSet rs0 and run rs.initiate() once)',
      'store_unsupported',
    );
  }
  return { version, topology: 'replicaSet' };
}
