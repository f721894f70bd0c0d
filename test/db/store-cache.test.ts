import t from 'tap';
import { StoreError, StoreUnavailableError } from '../../src/db/errors.js';
import { StoreCache } from '../../src/db/store-cache.js';
import type { Store } from '../../src/db/types.js';
import { until } from '../helpers/wait.js';

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

/** A store whose counter check the test controls: a token, a failure, or one that does not answer yet. */
function controlledStore() {
  const control = { token: 'items:1', failure: undefined as Error | undefined, hang: undefined as Promise<void> | undefined, checks: 0 };
  const store = {
    changeToken: async () => {
      control.checks += 1;
      if (control.hang) await control.hang;
      if (control.failure) throw control.failure;
      return control.token;
    },
    onChange: () => () => undefined,
  } as unknown as Store;
  return { store, control };
}

t.test('while the store is unavailable, cached entries are served until they are maxAgeMs old, and what is not cached fails as the store does', async (t) => {
  let now = 0;
  const { store, control } = controlledStore();
  const cache = new StoreCache(store, ['items'], { revalidateMs: 100, maxAgeMs: 1_000, now: () => now });
  t.equal(await cache.get('k', async () => 'cached'), 'cached');
  control.failure = new StoreUnavailableError('PostgreSQL items is unavailable: connect ECONNREFUSED');
  const unavailable = async () => {
    throw control.failure;
  };
  now = 200;
  t.equal(await cache.get('k', unavailable), 'cached', 'served although the counters could not be read');
  t.match(await cache.get('other', unavailable).catch((error: unknown) => error), { code: 'store_unavailable' }, 'an entry not cached fails with the store');
  let release!: () => void;
  control.hang = new Promise<void>((resolve) => (release = resolve));
  now = 400;
  const checks = control.checks;
  t.equal(await cache.get('k', unavailable), 'cached', 'a counter check that hangs does not hold the request');
  t.equal(control.checks, checks + 1, 'the check runs in the background');
  now = 600;
  t.equal(await cache.get('k', unavailable), 'cached', 'nor does a second request while it runs');
  t.equal(control.checks, checks + 1, 'which shares the check in progress');
  release();
  control.hang = undefined;
  now = 1_000;
  t.match(await cache.get('k', unavailable).catch((error: unknown) => error), { code: 'store_unavailable' }, 'at maxAgeMs the entry is no longer served');
});

t.test('once the store answers again with moved counters, the entries kept meanwhile are dropped', async (t) => {
  let now = 0;
  const { store, control } = controlledStore();
  const cache = new StoreCache(store, ['items'], { revalidateMs: 100, now: () => now });
  t.equal(await cache.get('k', async () => 'before'), 'before');
  control.failure = new StoreUnavailableError('PostgreSQL items is unavailable');
  now = 200;
  t.equal(await cache.get('k', async () => 'unused'), 'before');
  control.failure = undefined;
  control.token = 'items:2';
  let release!: () => void;
  control.hang = new Promise<void>((resolve) => (release = resolve));
  now = 400;
  t.equal(await cache.get('k', async () => 'unused'), 'before', 'the store was away at the last check: this request does not wait for the next');
  release();
  await until('the counter check to end', () => (control.checks > 0 && cache.size === 0 ? true : undefined));
  now = 600;
  t.equal(await cache.get('k', async () => 'after'), 'after', 'read again once the counters moved');
});

t.test('a counter check failing for another reason than an unavailable store fails the request', async (t) => {
  const { store, control } = controlledStore();
  let now = 0;
  const cache = new StoreCache(store, ['items'], { revalidateMs: 100, now: () => now });
  await cache.get('k', async () => 'cached');
  control.failure = new StoreError('PostgreSQL items: password authentication failed (28P01)', 'store_misconfigured');
  now = 200;
  t.match(await cache.get('k', async () => 'unused').catch((error: unknown) => error), { code: 'store_misconfigured' });
  control.failure = new StoreUnavailableError('PostgreSQL items is unavailable');
  now = 400;
  t.equal(await cache.get('k', async () => 'unused'), 'cached', 'unavailable: served');
  control.failure = new StoreError('PostgreSQL items: password authentication failed (28P01)', 'store_misconfigured');
  now = 600;
  await cache.get('k', async () => 'unused');
  now = 800;
  t.match(await cache.get('k', async () => 'unused').catch((error: unknown) => error), { code: 'store_misconfigured' }, 'once the store refuses instead, requests wait for the check again and fail');
});

t.test('once one cache of a store found it unavailable, its other caches (a decorated store included) serve without waiting for their own check', async (t) => {
  let now = 0;
  const { store, control } = controlledStore();
  // A decorating store (secrets sealed on write, say) over the same one: its caches share what they learn.
  const decorating = { decorated: store, changeToken: (collections: readonly string[]) => store.changeToken(collections), onChange: () => () => undefined } as unknown as Store;
  const keys = new StoreCache(store, ['keys'], { revalidateMs: 100, now: () => now });
  const providers = new StoreCache(decorating, ['apis'], { revalidateMs: 100, now: () => now });
  t.equal(await keys.get('k', async () => 'key'), 'key');
  t.equal(await providers.get('p', async () => 'provider'), 'provider');
  control.failure = new StoreUnavailableError('PostgreSQL keys is unavailable');
  now = 200;
  t.equal(await keys.get('k', async () => 'unused'), 'key', 'the first cache waits for its check, which finds the store away');
  let release!: () => void;
  control.hang = new Promise<void>((resolve) => (release = resolve));
  const checks = control.checks;
  t.equal(await providers.get('p', async () => 'unused'), 'provider', 'the second one does not wait for a check that hangs');
  t.equal(control.checks, checks + 1, 'its check runs in the background');
  release();
});
