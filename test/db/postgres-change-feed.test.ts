import t from 'tap';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { StoreCache } from '../../src/db/store-cache.js';
import { PostgresStore } from '../../src/db/postgres/store.js';
import { postgresBin, postgresUnavailable, startPostgres, type PostgresServer } from '../helpers/postgres.js';
import { until } from '../helpers/wait.js';

/** Counts each role's statements on the server; Debian's postgresql package ships it. */
const statementCounts = (() => {
  const bin = postgresBin();
  return bin && existsSync(path.join(bin, '..', 'lib', 'pg_stat_statements.so'));
})();

const unavailable = postgresUnavailable();
if (unavailable) {
  t.plan(0, unavailable);
} else {
  let server: PostgresServer | undefined;
  /** The writing host: no change feed, never caches. */
  let writer: PostgresStore | undefined;
  const hosts: PostgresStore[] = [];
  t.before(async () => {
    server = await startPostgres({ settings: statementCounts ? { shared_preload_libraries: 'pg_stat_statements' } : {} });
    writer = await PostgresStore.connect({ url: server.url() }, { changeFeed: false });
    if (statementCounts) await server.query('CREATE EXTENSION pg_stat_statements');
  });
  t.teardown(async () => {
    for (const host of hosts) await host.close();
    await writer?.close();
    await server?.stop();
  });

  /** Another host: its own role (so the server can count or limit its connections and statements) and pool. */
  const host = async (role: string, options: { changeFeed?: boolean; maxPoolSize?: number } = {}) => {
    await server!.query(`CREATE ROLE ${role} LOGIN PASSWORD '${role}-password'`);
    await server!.query(`GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO ${role}`);
    const store = await PostgresStore.connect({ url: `postgres://${role}:${role}-password@127.0.0.1:${server!.port}/${server!.database}`, maxPoolSize: options.maxPoolSize }, { changeFeed: options.changeFeed });
    hosts.push(store);
    return store;
  };
  const loader = (store: PostgresStore, id: string) => async () => (await store.collection('items').findOne({ _id: id }))?.v;
  const setV = (id: string, v: number) => writer!.collection('items').updateOne({ _id: id }, { $set: { v } }, { upsert: true });
  const live = (store: PostgresStore) => until('the change feed to listen', () => (store.feed!.live ? true : undefined), 10_000);

  t.test("a write on one host drops another host's cached entry through the change feed, with no counter check", async (t) => {
    await setV('one', 1);
    const reader = await host('reader');
    // No check of the counters for an hour: only the feed can tell this cache.
    const cache = new StoreCache(reader, ['items'], { revalidateMs: 3_600_000 });
    t.teardown(() => cache.close());
    const load = loader(reader, 'one');
    t.equal(await cache.get('one', load), 1);
    await live(reader);
    await setV('one', 2);
    await until("the reader's cache to drop the entry", () => (cache.has('one') ? undefined : true), 5_000);
    t.equal(await cache.get('one', load), 2, 'read again: the new value');
  });

  t.test('with the listening connection killed, caches read the counters again; once LISTEN is back they re-validate and hear writes again', async (t) => {
    await setV('two', 1);
    const reader = await host('flaky', { maxPoolSize: 1 });
    // Checks the counters at every read: from memory while the feed is up, with a query while it is down.
    const cache = new StoreCache(reader, ['items'], { revalidateMs: 0 });
    t.teardown(() => cache.close());
    const load = loader(reader, 'two');
    t.equal(await cache.get('two', load), 1);
    await live(reader);
    const killed = reader.feed!.backendPid;
    // The role's pool connection and listening connection stay; a new connection of the role is refused, so
    // LISTEN stays down until the limit is lifted.
    await server!.query('ALTER ROLE flaky CONNECTION LIMIT 1');
    await server!.query('SELECT pg_terminate_backend($1)', [killed]);
    await until('the feed to notice its connection is gone', () => (reader.feed!.live ? undefined : true), 5_000);

    await setV('two', 2);
    await until('the cache to read the new value through the counters', async () => ((await cache.get('two', load)) === 2 ? true : undefined), 5_000);
    t.notOk(reader.feed!.live, 'learnt without the feed: LISTEN is still refused');

    await setV('two', 3);
    t.ok(cache.has('two'), 'unread since: the entry is still held');
    await server!.query('ALTER ROLE flaky CONNECTION LIMIT -1');
    await live(reader);
    t.not(reader.feed!.backendPid, killed, 'a new listening connection');
    await until('the write made while the feed was down to drop the entry, once LISTEN is back', () => (cache.has('two') ? undefined : true), 5_000);
    t.equal(await cache.get('two', load), 3);

    await setV('two', 4);
    await until('the next write to drop the entry through the feed', () => (cache.has('two') ? undefined : true), 5_000);
    t.equal(await cache.get('two', load), 4);
  });

  t.test('an idle host with the change feed makes no query for its caches to stay fresh; without it, every check is one', { skip: statementCounts ? false : 'pg_stat_statements is not installed: no way to count statements' }, async (t) => {
    await setV('three', 1);
    const [fed, polling] = [await host('fed'), await host('polling', { changeFeed: false })];
    let now = 0;
    const caches = [fed, polling].map((store) => new StoreCache(store, ['items', 'keys'], { revalidateMs: 250, now: () => now }));
    t.teardown(() => caches.forEach((cache) => cache.close()));
    const loads = [0, 0];
    const read = (index: number) => caches[index]!.get('three', async () => (loads[index]! += 1));
    await read(0);
    await read(1);
    await live(fed);
    const statements = async () => {
      const { rows } = await server!.query(
        "SELECT r.rolname AS role, sum(s.calls)::int AS calls FROM pg_stat_statements s JOIN pg_roles r ON r.oid = s.userid WHERE r.rolname IN ('fed', 'polling') GROUP BY r.rolname",
      );
      return Object.fromEntries(rows.map((row) => [row.role, row.calls as number])) as Record<string, number | undefined>;
    };
    const before = await statements();
    // Twenty checks' worth of serving (5 s on the caches' clock), and the change token a discovery loop reads.
    for (let check = 0; check < 20; check += 1) {
      now += 250;
      await read(0);
      await read(1);
      await fed.changeToken(['servers']);
    }
    const after = await statements();
    t.equal((after.fed ?? 0) - (before.fed ?? 0), 0, 'the host with the feed: no statement at all');
    t.equal((after.polling ?? 0) - (before.polling ?? 0), 20, 'the host without: one statement per check');
    t.same(loads, [1, 1], 'both served from their caches throughout');
  });
}
