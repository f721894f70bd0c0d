import path from 'node:path';
import type { ResolvedConfig } from '../config/schema.js';
import { STANDARD_INDEXES } from './documents.js';
import { EmbeddedStore } from './embedded/store.js';
import type { Store } from './types.js';

export type StoreConfig = Pick<ResolvedConfig, 'dataDir' | 'db' | 'mongodb'>;

/** The embedded file's path: `db.path` (relative to the working directory) or `<dataDir>/fleetplane.db`. */
export function embeddedStorePath(config: StoreConfig): string {
  return config.db.path ? path.resolve(config.db.path) : path.join(config.dataDir, 'fleetplane.db');
}

/** Creates the unique indexes of SPEC 7.2; idempotent, so every process may call it at start. */
export async function ensureStandardIndexes(store: Store): Promise<void> {
  for (const { collection, fields } of STANDARD_INDEXES) await store.collection(collection).createIndex(fields, { unique: true });
}

/** MongoDB when `mongodb.url` is set, else the embedded SQLite file; standard indexes included. */
export async function openStore(config: StoreConfig): Promise<Store> {
  // The driver is loaded only when MongoDB is configured: most servers run embedded and start faster without it.
  const store = config.mongodb.url
    ? await (await import('./mongodb/store.js')).MongoStore.connect({ url: config.mongodb.url, database: config.mongodb.database })
    : await EmbeddedStore.open(embeddedStorePath(config));
  try {
    await ensureStandardIndexes(store);
  } catch (error) {
    await store.close();
    throw error;
  }
  return store;
}
