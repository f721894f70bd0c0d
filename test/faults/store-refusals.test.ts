import t from 'tap';
import pg from 'pg';
import { postgresUnavailable } from '../helpers/postgres.js';
import { SCALE, until } from '../helpers/wait.js';
import { send } from './store-load.js';
import { PASSWORD, ROLE, startStoreServer, type StoreServer } from './store-server.js';

// A running server whose PostgreSQL store refuses it, or whose change feed was down while a key was revoked
// elsewhere: each answered as docs/postgres.md says ("Start and run-time errors", "When the store is away").

const slack = (SCALE - 1) * 1_000;
const ANSWER_BOUND_MS = 10_000 + slack;

const why = postgresUnavailable();
if (why) t.plan(0, why);
let fixture: StoreServer;
if (!why) {
  t.before(async () => {
    fixture = await startStoreServer();
  });
  t.teardown(() => fixture?.stop());
}

let written = 0;
const write = (key = fixture.adminKey) => send(fixture.server.port, 'write', { path: '/crud', key, body: { method: 'object.create', collection: 'refusals', documents: [{ n: ++written }] } });
const read = (key: string) => send(fixture.server.port, 'read', { path: '/crud', key, body: { method: 'object.read', collection: 'refusals', limit: 1 } });
const superuser = (sql: string) => fixture.pg.query(sql, [], 'postgres');
/** The server's listening connections (one per process that caches), ready: LISTEN done, counters read. */
const listening = async () =>
  (await fixture.pg.query("SELECT count(*)::int AS n FROM pg_stat_activity WHERE usename = $1 AND application_name = 'fleetplane-changes' AND state = 'idle' AND query LIKE 'SELECT collection, version%'", [ROLE], 'postgres')).rows[0].n as number;
const refusedLines = (from: number) => fixture.server.events.slice(from).filter((event) => event.msg === 'the data store refused this server');
const recovers = () => until('a write to succeed again', async () => ((await write()).status === 200 ? true : undefined), 30_000);

t.test('a key revoked on another host while the change feed was down is refused once the feed is back', async (t) => {
  const { key, keyId } = await fixture.newKey('revocable');
  for (let attempt = 0; attempt < 6; attempt++) t.equal((await read(key)).status, 200, 'the key works and is cached');
  const feeds = await until('the change feeds to listen', async () => ((await listening()) >= 2 ? listening() : undefined));
  // The server's role can no longer log in, and its connections are cut: its feed is down and stays down.
  await superuser(`ALTER ROLE ${ROLE} NOLOGIN`);
  await fixture.cutConnections();
  await until('the feeds to be gone', async () => ((await listening()) === 0 ? true : undefined));
  await fixture.revoke(keyId);
  await superuser(`ALTER ROLE ${ROLE} LOGIN`);
  await until('the feeds to listen again', async () => ((await listening()) >= feeds ? true : undefined), 15_000);
  const refused = await until('the revoked key to be refused', async () => {
    const answer = await read(key);
    return answer.status === 401 || answer.status === 403 ? answer : undefined;
  });
  t.match(refused, { code: /unauthorized|forbidden|invalid_key|revoked|not_authorized/ }, `refused: ${refused.status} ${refused.code}`);
  for (let attempt = 0; attempt < 6; attempt++) t.not((await read(key)).status, 200, 'by every worker');
});

t.test('a wrong password at run time: 500 store_misconfigured, one log line per worker naming why; the right one again and writes succeed', async (t) => {
  const from = fixture.server.events.length;
  await superuser(`ALTER ROLE ${ROLE} PASSWORD 'not-the-configured-one'`);
  await fixture.cutConnections();
  const first = await until('a write refused for the password', async () => {
    const answer = await write();
    return answer.status === 500 ? answer : undefined;
  });
  t.equal(first.code, 'store_misconfigured');
  const answers = await Promise.all(Array.from({ length: 30 }, () => write()));
  t.same([...new Set(answers.map((answer) => `${answer.status} ${answer.code}`))], ['500 store_misconfigured']);
  const lines = refusedLines(from);
  t.ok(lines.length >= 1 && lines.length <= 2, `one line a minute per worker that answered (${lines.length})`);
  t.ok(lines.every((line) => /password authentication failed for user "fleet"/.test(String((line.err as { message?: string })?.message))), 'each names the reason');
  t.notMatch(JSON.stringify(lines), PASSWORD, 'never the password');
  await superuser(`ALTER ROLE ${ROLE} PASSWORD '${PASSWORD}'`);
  await recovers();
});

t.test('a role that lost its right to write: 500 store_misconfigured for writes, reads served; granted again, writes succeed', async (t) => {
  await fixture.pg.query(`REVOKE INSERT ON fleetplane_documents FROM ${ROLE}`, [], ROLE);
  t.teardown(() => fixture.pg.query(`GRANT INSERT ON fleetplane_documents TO ${ROLE}`, [], ROLE));
  t.match(await write(), { status: 500, code: 'store_misconfigured' });
  t.match(await read(fixture.adminKey), { status: 200 });
  await fixture.pg.query(`GRANT INSERT ON fleetplane_documents TO ${ROLE}`, [], ROLE);
  await recovers();
});

t.test('max_connections exhausted at run time: 503 store_unavailable within the bound; connections free again, writes succeed', async (t) => {
  // Every ordinary connection slot taken by another role while the server's were cut; it must open new ones.
  await superuser(`CREATE ROLE filler LOGIN PASSWORD 'filler'`);
  await superuser(`ALTER ROLE ${ROLE} NOLOGIN`);
  await fixture.cutConnections();
  const fillers: pg.Client[] = [];
  t.teardown(() => Promise.all(fillers.map((client) => client.end().catch(() => undefined))));
  const fill = async () => {
    const before = fillers.length;
    for (;;) {
      const client = new pg.Client({ connectionString: `postgres://filler:filler@${fixture.pg.host}:${fixture.pg.port}/postgres` });
      client.on('error', () => undefined);
      const full = await client.connect().then(() => false, (error: { code?: string }) => error.code === '53300');
      if (full) return fillers.length - before;
      fillers.push(client);
    }
  };
  await fill();
  // A slot can be busy for a moment when the filling ends (a refused login of the server's, a backend exiting):
  // full means a second pass finds none free.
  await until('every connection slot taken by another role', async () => ((await fill()) === 0 ? true : undefined), 10_000, { everyMs: 200 });
  await superuser(`ALTER ROLE ${ROLE} LOGIN`);
  const answers = await Promise.all(Array.from({ length: 6 }, () => write()));
  t.same([...new Set(answers.map((answer) => `${answer.status} ${answer.code}`))], ['503 store_unavailable'], `${fillers.length} connections of another role fill the server`);
  t.ok(answers.every((answer) => answer.retryAfter === '5'), 'with Retry-After');
  const longest = Math.max(...answers.map((answer) => answer.endedAt - answer.startedAt));
  t.ok(longest <= ANSWER_BOUND_MS, `answered within ${ANSWER_BOUND_MS} ms (longest ${longest} ms)`);
  await Promise.all(fillers.splice(0).map((client) => client.end()));
  await recovers();
  t.same(fixture.restarts(), [], 'no worker died, was recycled or replaced in any of these');
});
