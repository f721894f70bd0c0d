import path from 'node:path';
import { STANDARD_INDEXES } from './documents.js';
import { EmbeddedStore } from './embedded/store.js';
import { StoreError } from './errors.js';
import type { MongoSettings } from './mongodb/settings.js';
import type { PostgresSettings } from './postgres/settings.js';
import type { Store } from './types.js';

/** What opening the store reads of the resolved configuration (`dataDir`, `db`, `postgres`, `mongodb`). */
export interface StoreConfig {
  dataDir: string;
  db: { path?: string; lockTimeoutMs?: number };
  mongodb: Partial<MongoSettings>;
  /** Optional for callers that name only an embedded file or a MongoDB database; the resolved config has it. */
  postgres?: Partial<PostgresSettings>;
}

/** The backend a configuration chooses: PostgreSQL or MongoDB when its URL is set (never both), else embedded. */
export function storeBackendOf(config: StoreConfig): Store['backend'] {
  if (config.postgres?.url && config.mongodb.url) {
    throw new StoreError('postgres.url and mongodb.url are both set: choose one store backend', 'store_misconfigured');
  }
  return config.postgres?.url ? 'postgres' : config.mongodb.url ? 'mongodb' : 'embedded';
}

/** The embedded file's path: `db.path` (relative to the working directory) or `<dataDir>/fleetplane.db`. */
export function embeddedStorePath(config: StoreConfig): string {
  return config.db.path ? path.resolve(config.db.path) : path.join(config.dataDir, 'fleetplane.db');
}

/** Creates the unique indexes of SPEC 7.2; idempotent, so every process may call it at start. */
export async function ensureStandardIndexes(store: Store): Promise<void> {
  for (const { collection, fields } of STANDARD_INDEXES) await store.collection(collection).createIndex(fields, { unique: true });
}

/**
 * PostgreSQL when `postgres.url` is set, MongoDB when `mongodb.url` is, else the embedded SQLite file; standard
 * indexes included. A server that cannot be reached fails with `StoreUnavailableError` (see
 * `openStoreWithRetry`); one that is too old (or a standalone MongoDB) with a `store_unsupported` StoreError,
 * refused credentials or a missing database with `store_misconfigured`.
 */
export async function openStore(config: StoreConfig): Promise<Store> {
  const backend = storeBackendOf(config);
  // A driver is loaded only when its backend is configured: most servers run embedded and start faster without.
  let store: Store;
  if (backend === 'postgres') {
    const { url, ...settings } = config.postgres!;
    store = await (await import('./postgres/store.js')).PostgresStore.connect({ url: url!, ...settings });
  } else if (backend === 'mongodb') {
    const { url, ...settings } = config.mongodb;
    store = await (await import('./mongodb/store.js')).MongoStore.connect({ url: url!, ...settings });
  } else {
    store = await EmbeddedStore.open(embeddedStorePath(config), { lockTimeoutMs: config.db.lockTimeoutMs });
  }
  try {
    await ensureStandardIndexes(store);
  } catch (error) {
    await store.close();
    throw error;
  }
  return store;
}
