import t from 'tap';
import { once } from 'node:events';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { loadConfig } from '../../src/config/load.js';
import { StoreError, StoreUnavailableError } from '../../src/db/errors.js';
import { openStore } from '../../src/db/open.js';
import { assertSupportedServer, ensureSchema } from '../../src/db/postgres/schema.js';
import pg, { type PoolClient } from 'pg';
import { postgresUnavailable, startPostgres, type PostgresServer } from '../helpers/postgres.js';
import { FAST, fleetplane, freePort, request, startCli, tempDir } from '../helpers/server-process.js';
import { until } from '../helpers/wait.js';

const failure = (promise: Promise<unknown>) => promise.then(() => undefined, (error: unknown) => error as Error);
const configFor = (url: string) => loadConfig({ env: {}, object: { dataDir: tempDir(), postgres: { url } } }).config;

t.test('a server older than PostgreSQL 14 is refused with one line naming both versions', async (t) => {
  const client = { query: async () => ({ rows: [{ version: '130011' }] }) } as unknown as PoolClient;
  t.match(await failure(assertSupportedServer(client)), { code: 'store_unsupported', message: 'PostgreSQL 13.11 is too old: fleetplane needs PostgreSQL 14 or later' });
});

const unavailable = postgresUnavailable();
if (unavailable) {
  t.test('opening a PostgreSQL store at start', (t) => t.plan(0, unavailable));
} else {
  let server: PostgresServer | undefined;
  t.before(async () => {
    server = await startPostgres();
  });
  t.teardown(() => server?.stop());
  const withPassword = (password: string, database = server!.database) => `postgres://postgres:${password}@127.0.0.1:${server!.port}/${database}`;

  t.test('a missing database is a one-line start error naming it, not retried', async (t) => {
    const error = await failure(openStore(configFor(server!.url('no_such_database'))));
    t.ok(error instanceof StoreError && !(error instanceof StoreUnavailableError));
    t.match(error, { code: 'store_misconfigured', message: /database "no_such_database" does not exist/ });
    t.notMatch(error!.message, /\n/, 'one line');
    t.notMatch(error!.message, server!.password, 'no password in it');
  });

  t.test('a wrong password is a one-line start error, without the password', async (t) => {
    const error = await failure(openStore(configFor(withPassword('not-the-password'))));
    t.match(error, { code: 'store_misconfigured', message: /refused the credentials: password authentication failed for user "postgres"/ });
    t.notMatch(error!.message, 'not-the-password');
  });

  t.test('a server that does not answer is retried: 503 store_unavailable', async (t) => {
    const error = await failure(openStore(configFor(`postgres://postgres:secret@127.0.0.1:${await freePort()}/x`)));
    t.ok(error instanceof StoreUnavailableError);
    t.match(error, { code: 'store_unavailable', message: /^cannot connect to PostgreSQL "x" on 127\.0\.0\.1:\d+: connect ECONNREFUSED/ });
    t.notMatch(error!.message, 'secret');
  });

  t.test('a host name that does not resolve is a one-line start error, not retried', async (t) => {
    const error = await failure(openStore(configFor('postgres://fleet:secret@no-such-host.invalid:5432/fleet')));
    t.match(error, { code: 'store_misconfigured', message: /^PostgreSQL "fleet" on no-such-host\.invalid:5432: the host name does not resolve/ });
    t.notMatch(error!.message, 'secret');
  });

  t.test('a role without the right to create the tables is refused at start; once an owner created them, it is enough to use them', async (t) => {
    await server!.query("CREATE ROLE limited LOGIN PASSWORD 'limited-password'", [], 'postgres');
    await server!.query('CREATE DATABASE fresh', [], 'postgres');
    const limited = `postgres://limited:limited-password@127.0.0.1:${server!.port}/fresh`;
    t.match(await failure(openStore(configFor(limited))), { code: 'store_misconfigured', message: /the role lacks a right fleetplane needs: permission denied for schema public/ });
    const owner = await openStore(configFor(server!.url('fresh')));
    await owner.close();
    await server!.query('GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO limited', [], 'fresh');
    const store = await openStore(configFor(limited));
    t.teardown(() => store.close());
    await store.collection('clusters').insertOne({ organization_id: 'o1', name: 'one' });
    t.equal(await store.collection('clusters').countDocuments(), 1);
  });

  t.test('fleetplane init and keys list work on a PostgreSQL store, with no embedded file in the data directory', async (t) => {
    await server!.query('CREATE DATABASE commands', [], 'postgres');
    const dataDir = tempDir();
    const file = path.join(dataDir, 'fleetplane.config.json');
    writeFileSync(file, JSON.stringify({ dataDir, postgres: { url: server!.url('commands') } }));
    const init = await fleetplane(['init', '--json', '--host', 'acme.example', '--config', file]);
    t.equal(init.status, 0, init.stderr);
    const { key_id: keyId } = JSON.parse(init.stdout) as { key_id: string };
    const listed = await fleetplane(['keys', 'list', '--json', '--config', file]);
    t.equal(listed.status, 0, listed.stderr);
    t.match(JSON.parse(listed.stdout), { keys: [{ key_id: keyId, admin: true }] });
    t.notOk(existsSync(path.join(dataDir, 'fleetplane.db')), 'the documents are in PostgreSQL');
    const again = await fleetplane(['init', '--config', file]);
    t.match(again, { status: 1, stderr: /the store \(PostgreSQL database "commands" on 127\.0\.0\.1:\d+\) is already initialized/ });
  });

  t.test('a server with workers starts on PostgreSQL: its first organization and key, and tenant documents, are written there', async (t) => {
    await server!.query('CREATE DATABASE served', [], 'postgres');
    const dataDir = tempDir();
    const port = await freePort();
    const file = path.join(dataDir, 'fleetplane.config.json');
    writeFileSync(file, JSON.stringify({ ...FAST, dataDir, http: { port, host: '127.0.0.1' }, workers: 2, postgres: { url: server!.url('served') } }));
    const child = startCli(t, ['start', '--config', file]);
    let output = '';
    child.stdout!.on('data', (chunk) => (output += chunk));
    child.stderr!.on('data', (chunk) => (output += chunk));
    await until('the server to be ready', () => request(port, '/readyz').then((reply) => (reply.status === 200 ? true : undefined), () => undefined), 30_000, { last: () => output.slice(-500) });
    const key = readFileSync(path.join(dataDir, 'admin.key'), 'utf8').trim();
    const created = await request(port, '/crud', { key, body: { method: 'object.create', collection: 'things', documents: [{ name: 'a' }] } });
    t.equal(created.status, 200, created.body);
    const stored = await server!.query("SELECT collection FROM fleetplane_documents WHERE collection IN ('organizations', 'keys', 'things') ORDER BY collection", [], 'served');
    t.same(stored.rows.map((row) => row.collection), ['keys', 'organizations', 'things']);
    const connections = await server!.query("SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = 'served'", [], 'postgres');
    const listening = await server!.query("SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = 'served' AND application_name = 'fleetplane-changes'", [], 'postgres');
    t.ok(connections.rows[0].n <= 3 * (4 + 1), `within 3 processes × (postgres.maxPoolSize 4 + the change feed's connection) (${connections.rows[0].n})`);
    t.ok(listening.rows[0].n <= 3, `at most one listening connection per process (${listening.rows[0].n})`);
    const exited = once(child, 'exit');
    child.kill('SIGTERM');
    t.equal((await exited)[0], 0, 'a clean stop');
  });

  t.test('fleetplane start with a missing database exits 1 with one line on stderr, no stack trace', async (t) => {
    const dataDir = tempDir();
    const file = path.join(dataDir, 'fleetplane.config.json');
    writeFileSync(file, JSON.stringify({ dataDir, http: { port: await freePort(), host: '127.0.0.1' }, workers: 0, postgres: { url: server!.url('missing') } }));
    const result = await fleetplane(['start', '--config', file]);
    t.equal(result.status, 1);
    t.match(result.stderr, /^fleetplane: PostgreSQL "missing" on 127\.0\.0\.1:\d+: database "missing" does not exist: create it first/);
    t.equal(result.stderr.trim().split('\n').length, 1, 'one line');
    t.notMatch(result.stderr, server!.password);
  });

  t.test('a process that waited for the schema lock while another created the tables finds them, not a second creation', async (t) => {
    const database = 'schema_race';
    await server!.query(`CREATE DATABASE ${database}`, [], 'postgres');
    const creator = new pg.Client({ connectionString: server!.url(database) });
    const waiter = new pg.Client({ connectionString: server!.url(database) });
    await creator.connect();
    await waiter.connect();
    t.teardown(() => Promise.all([creator.end(), waiter.end()]));
    // The creator holds the lock first; the waiter looks for the tables (none yet), then queues for the lock.
    await creator.query('BEGIN');
    await creator.query('SELECT pg_advisory_xact_lock($1)', [0x666c656574706c61n.toString()]);
    const waiting = ensureSchema(waiter as unknown as PoolClient).then(() => undefined, (error: unknown) => error as Error);
    await until('the second process to queue for the schema lock', async () => {
      const { rows } = await creator.query<{ waiting: number }>("SELECT count(*)::int AS waiting FROM pg_locks WHERE locktype = 'advisory' AND NOT granted");
      return rows[0]!.waiting > 0 || undefined;
    });
    await creator.query('CREATE TABLE fleetplane_schema (singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton), version integer NOT NULL)');
    await creator.query('INSERT INTO fleetplane_schema (version) VALUES (1)');
    await creator.query('COMMIT');
    t.equal(await waiting, undefined, 'the waiter found the schema the other one committed');
    const { rows } = await waiter.query<{ count: number }>('SELECT count(*)::int AS count FROM fleetplane_schema');
    t.equal(rows[0]!.count, 1, 'one schema row');
  });
}
