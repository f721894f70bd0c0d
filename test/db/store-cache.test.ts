import t from 'tap';
import { StoreCache } from '../../src/db/store-cache.js';
import type { Store } from '../../src/db/types.js';

/** A store whose counters never move: a bump that was lost, as far as this process can tell. */
const frozenStore = { changeToken: async () => 'items:7', onChange: () => () => undefined } as unknown as Store;

t.test('an entry is read again after maxAgeMs even when the counters never change', async (t) => {
  let now = 0;
  const cache = new StoreCache(frozenStore, ['items'], { revalidateMs: 100, maxAgeMs: 1_000, now: () => now });
  let loads = 0;
  const load = async () => ++loads;
  t.equal(await cache.get('k', load), 1);
  now = 999;
  t.equal(await cache.get('k', load), 1, 'within the maximum age: the cached value');
  now = 1_099;
  t.equal(await cache.get('k', load), 2, 'past the maximum age, at the next counter check: read from the store again');
  now = 1_600;
  t.equal(await cache.get('k', load), 2, 'the new entry has its own age');
});
