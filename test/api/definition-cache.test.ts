import t from 'tap';
import path from 'node:path';
import { DefinitionCache } from '../../src/api/definition-cache.js';
import { EmbeddedStore } from '../../src/db/embedded/store.js';
import { tempDir, testStore } from '../auth/fixtures/tenants.js';

/** Compiles a `clusters` document by its `size`, refusing negative ones, and counts the compilations. */
function sizes() {
  const compiled: string[] = [];
  const compile = (document: Record<string, unknown>) => {
    compiled.push(String(document.name));
    if ((document.size as number) < 0) throw new Error(`size of ${String(document.name)} is negative`);
    return { size: document.size as number };
  };
  return { compiled, compile };
}

t.test('a definition changed by another process is used once the revalidation interval passes', async (t) => {
  const file = path.join(tempDir(), 'fleetplane.db');
  const writer = await testStore(file);
  const reader = await EmbeddedStore.open(file);
  t.teardown(async () => {
    await writer.close();
    await reader.close();
  });
  await writer.forOrganization('org-1').collection('clusters').insertOne({ name: 'main', size: 1 });
  let now = 1_000;
  const { compiled, compile } = sizes();
  const cache = new DefinitionCache(reader, 'clusters', compile, { revalidateMs: 250, now: () => now });
  t.same(await cache.get('org-1', 'main'), { size: 1 });
  t.same(await cache.get('org-1', 'main'), { size: 1 });
  t.same(compiled, ['main'], 'compiled once, then served from the cache');

  await writer.forOrganization('org-1').collection('clusters').updateOne({ name: 'main' }, { $set: { size: 2 } });
  now += 100;
  t.same(await cache.get('org-1', 'main'), { size: 1 }, 'inside the interval the cached definition still answers');
  now += 150;
  t.same(await cache.get('org-1', 'main'), { size: 2 }, 'after it, the new one');
  t.equal(await cache.get('org-2', 'main'), null, "another organization's name is its own");
});

t.test('a write through the same store is seen at once; a broken definition is cached as its error', async (t) => {
  const store = await testStore();
  t.teardown(() => store.close());
  const scope = store.forOrganization('org-1');
  const { compiled, compile } = sizes();
  const cache = new DefinitionCache(store, 'clusters', compile, { revalidateMs: 3_600_000 });
  t.equal(await cache.get('org-1', 'main'), null);
  await scope.collection('clusters').insertOne({ name: 'main', size: -1 });
  await t.rejects(cache.get('org-1', 'main'), /size of main is negative/);
  await t.rejects(cache.get('org-1', 'main'), /size of main is negative/);
  t.same(compiled, ['main'], 'the broken definition was compiled once');
  await scope.collection('clusters').updateOne({ name: 'main' }, { $set: { size: 3 } });
  t.same(await cache.get('org-1', 'main'), { size: 3 });
});

t.test("forget releases one organization's compiled definitions and no other's; they are read again on the next use", async (t) => {
  const store = await testStore();
  t.teardown(() => store.close());
  await store.forOrganization('org-1').collection('clusters').insertOne({ name: 'main', size: 1 });
  await store.forOrganization('org-2').collection('clusters').insertOne({ name: 'main', size: 2 });
  const { compiled, compile } = sizes();
  const cache = new DefinitionCache(store, 'clusters', compile, { revalidateMs: 3_600_000 });
  t.teardown(() => cache.close());
  await cache.get('org-1', 'main');
  await cache.get('org-2', 'main');
  t.equal(cache.forget('org-1'), 1, 'one entry released');
  await cache.get('org-1', 'main');
  await cache.get('org-2', 'main');
  t.same(compiled, ['main', 'main', 'main'], 'org-1 compiled again, org-2 still cached');
});
