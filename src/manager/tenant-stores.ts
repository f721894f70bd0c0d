import { openStore } from '../db/open.js';
import type { Store } from '../db/types.js';
import type { ClusterRecord } from '../inventory/records.js';

/**
 * The stores of the tenant clusters a parent manages, opened on first use and kept: one per embedded file or
 * MongoDB database, whichever clusters name it.
 */
export class TenantStores {
  private readonly open = new Map<string, Promise<Store>>();

  /** The cluster's store, or undefined when it names none (its servers then keep their own). */
  get(cluster: ClusterRecord): Promise<Store | undefined> {
    const reference = cluster.store;
    if (!reference?.path && !reference?.mongodbUrl) return Promise.resolve(undefined);
    const key = reference.mongodbUrl ? `mongodb\u0000${reference.mongodbUrl}\u0000${reference.database ?? 'fleetplane'}` : `embedded\u0000${reference.path}`;
    let store = this.open.get(key);
    if (!store) {
      store = openStore({
        dataDir: '.',
        db: reference.mongodbUrl ? {} : { path: reference.path },
        mongodb: { url: reference.mongodbUrl, database: reference.database ?? 'fleetplane' },
      });
      // A store that failed to open is tried again next time, not remembered as failed.
      store.catch(() => this.open.delete(key));
      this.open.set(key, store);
    }
    return store;
  }

  async close(): Promise<void> {
    const stores = [...this.open.values()];
    this.open.clear();
    await Promise.all(stores.map((store) => store.then((opened) => opened.close()).catch(() => undefined)));
  }
}
