import path from 'node:path';
import { STANDARD_INDEXES } from './documents.js';
import { EmbeddedStore } from './embedded/store.js';
import type { MongoSettings } from './mongodb/settings.js';
import type { Store } from './types.js';

/** What opening the store reads of the resolved configuration (`dataDir`, `db`, `mongodb`). */
export interface StoreConfig {
  dataDir: string;
  db: { path?: string; lockTimeoutMs?: number };
  mongodb: Partial<MongoSettings>;
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
 * MongoDB when `mongodb.url` is set, else the embedded SQLite file; standard indexes included. A MongoDB server
 * that cannot be reached fails with `StoreUnavailableError` (see `openStoreWithRetry`), one that is too old or
 * standalone with a `store_unsupported` StoreError.
 */
export async function openStore(config: StoreConfig): Promise<Store> {
  const { url, ...settings } = config.mongodb;
  // The driver is loaded only when MongoDB is configured: most servers run embedded and start faster without it.
  const store = url
    ? await (await import('./mongodb/store.js')).MongoStore.connect({ url, ...settings })
    : await EmbeddedStore.open(embeddedStorePath(config), { lockTimeoutMs: config.db.lockTimeoutMs });
  try {
    await ensureStandardIndexes(store);
  } catch (error) {
    await store.close();
    throw error;
  }
  return store;
}
