import t, { type Test } from 'tap';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { postgresUnavailable } from '../helpers/postgres.js';
import { request } from '../helpers/server-process.js';
import { SCALE, until } from '../helpers/wait.js';
import { storeLoad, tally, type LoadAnswer } from './store-load.js';
import { ROLE, startStoreServer, type StoreServer } from './store-server.js';

// A server whose PostgreSQL store goes away under load, stopped then started again, or frozen with its sockets
// open: writes answer 503 store_unavailable within the bound (never 500, never a hang), the probes stay 200,
// no process dies or is replaced, writes succeed again soon after the store is back, and every write that was
// acknowledged is in the store.

/** The product's promises (docs/postgres.md, "When the store is away"), with room only for a loaded machine. */
const slack = (SCALE - 1) * 1_000;
const ANSWER_BOUND_MS = 10_000 + slack;
const RECOVERY_BOUND_MS = 30_000 + slack;
const COLLECTION = 'faults';

const why = postgresUnavailable();
if (why) t.plan(0, why);
let fixture: StoreServer;
/** An upstream the organization's provider `echo` calls: what a server serves from its caches alone. */
const upstream = http.createServer((_request, response) => response.writeHead(200, { 'content-type': 'application/json' }).end('{"pong":true}'));
const CALL = { api: 'echo', endpoint: 'ping', method: 'get' };
if (!why) {
  t.before(async () => {
    fixture = await startStoreServer();
    await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
    const provider = { name: 'echo', baseUrl: `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`, endpoints: { ping: { method: 'get', path: '/ping' } } };
    const created = await request(fixture.server.port, '/crud', { host: 'localhost', key: fixture.adminKey, body: { method: 'object.create', collection: 'apis', documents: [provider] } });
    if (created.status !== 200) throw new Error(`provider not created: ${created.body}`);
  });
  t.teardown(async () => {
    upstream.close();
    await fixture?.stop();
  });
}

const hold = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const writes = (answers: LoadAnswer[]) => answers.filter((answer) => answer.kind === 'write');
const describe = (answer: LoadAnswer) => `${answer.kind} ${answer.status} ${answer.code ?? ''} in ${answer.endedAt - answer.startedAt} ms`;

/** Runs the load across `outage` (which takes the store away and brings it back), then checks what every case shares. */
async function acrossOutage(t: Test, prefix: string, outage: (marks: { away(): void; healing(): void; back(): void }) => Promise<void>) {
  const pids = await fixture.pids();
  const load = storeLoad(fixture.server.port, fixture.adminKey, { collection: COLLECTION, prefix, api: CALL });
  // Each worker's caches hold the key, organization and provider before the store goes: every request comes on a
  // connection of its own, which the primary hands to the workers in turn, so twenty answered calls reached both.
  const served = (kind: LoadAnswer['kind']) => load.answers.filter((answer) => answer.kind === kind && answer.status === 200).length;
  await until('/api calls and writes served before the outage', () => (served('api') >= 20 && served('write') >= 20 ? true : undefined), 30_000);
  // Away: the store no longer answers; healing: it may answer from now on; back: it answers.
  let awayAt = 0;
  let healingAt = 0;
  let backAt = 0;
  await outage({ away: () => (awayAt = Date.now()), healing: () => (healingAt = Date.now()), back: () => (backAt = Date.now()) });
  const recovered = await new Promise<LoadAnswer | undefined>((resolve) => {
    const check = setInterval(() => {
      const first = writes(load.answers).find((answer) => answer.startedAt >= backAt && answer.status === 200);
      if (first || Date.now() - backAt > RECOVERY_BOUND_MS) {
        clearInterval(check);
        resolve(first);
      }
    }, 50);
  });
  await hold(2_000);
  const answers = await load.stop();
  const during = answers.filter((answer) => answer.startedAt >= awayAt && answer.endedAt <= healingAt);
  const figures = {
    requests: answers.length,
    before: tally(answers.filter((answer) => answer.endedAt < awayAt)),
    during: tally(during),
    after: tally(answers.filter((answer) => answer.startedAt > backAt)),
    outageMs: healingAt - awayAt,
    recoveryMs: recovered ? recovered.endedAt - backAt : null,
    longestWriteMs: Math.max(...writes(answers).map((answer) => answer.endedAt - answer.startedAt)),
  };
  t.comment(JSON.stringify(figures));

  // A write answered only after the store is back (started late in a freeze, say) was still tried while it was away.
  t.ok(writes(answers).some((answer) => answer.startedAt >= awayAt && answer.startedAt < healingAt), 'writes were tried while the store was away');
  t.same(writes(during).filter((answer) => answer.status !== 503 || answer.code !== 'store_unavailable').map(describe), [], 'while it was away, every write answered 503 store_unavailable');
  t.ok(writes(during).every((answer) => answer.retryAfter === '5'), 'with Retry-After: 5');
  const unexpected = answers.filter((answer) => answer.status !== 200 && !(answer.status === 503 && answer.code === 'store_unavailable' && (answer.kind === 'write' || answer.kind === 'read')));
  t.same(unexpected.map(describe), [], 'probes and /api calls always 200; writes and reads 200 or 503 store_unavailable, never 500 or no answer');
  t.ok(during.some((answer) => answer.kind === 'api'), '/api was called while the store was away, its provider and key served from the caches');
  t.ok(figures.longestWriteMs <= ANSWER_BOUND_MS, `every write answered within ${ANSWER_BOUND_MS} ms (longest ${figures.longestWriteMs} ms)`);
  t.ok(recovered, `a write succeeded within ${RECOVERY_BOUND_MS} ms of the store's return (${figures.recoveryMs} ms)`);
  t.same(fixture.restarts(), [], 'no worker died, was recycled or replaced');
  t.same(await fixture.pids(), pids, 'the same primary and workers serve');

  const acknowledged = writes(answers).filter((answer) => answer.status === 200).map((answer) => answer.name!);
  const { rows } = await fixture.pg.query("SELECT doc->>'name' AS name FROM fleetplane_documents WHERE collection = $1 AND doc->>'name' LIKE $2", [COLLECTION, `${prefix}-%`], ROLE);
  const stored = new Set(rows.map((row: { name: string }) => row.name));
  const lost = acknowledged.filter((name) => !stored.has(name));
  t.comment(`acknowledged writes: ${acknowledged.length}; in the store: ${stored.size}; lost: ${lost.length}`);
  t.same(lost, [], 'every acknowledged write is in the store');
}

t.test('PostgreSQL stopped for a while under load, then started again', async (t) => {
  await acrossOutage(t, 'stopped', async ({ away, healing, back }) => {
    await fixture.pg.stopKeepingData();
    away();
    await hold(8_000);
    healing();
    await fixture.pg.start();
    back();
  });
});

t.test('PostgreSQL frozen for 12 s under load (its sockets open, nothing answered), then thawed', async (t) => {
  await acrossOutage(t, 'frozen', async ({ away, healing, back }) => {
    await fixture.pg.freeze();
    away();
    await hold(12_000);
    healing();
    await fixture.pg.thaw();
    back();
  });
});
