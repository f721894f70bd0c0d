import t from 'tap';
import type { ServerEvent, ServerProcess } from '../helpers/server-process.js';
import { meshConfig, meshIds, startMeshServer, waitForPeers } from '../mesh/helpers.js';
import { past, scaled, until } from '../helpers/wait.js';

// The SPEC 6.3 schedule with a shorter base so a test sees several attempts; the formula is the production one.
const SCHEDULE = { baseMs: 150, maxDelayMs: 600, jitterMinMs: 20, jitterMaxMs: 80, maxAttempts: 10 };
const delayBounds = (attempt: number) => {
  const backoff = Math.min(SCHEDULE.maxDelayMs, SCHEDULE.baseMs * 1.5 ** attempt);
  return [Math.floor(backoff + SCHEDULE.jitterMinMs), Math.ceil(backoff + SCHEDULE.jitterMaxMs)] as const;
};

// B has the smallest id, so both A and C dial it: both must retry when it goes away.
const { dbPath, ids } = meshIds('n1', 'n2', 'n3');
const [B, A, C] = ids as [string, string, string];
const configs = new Map(ids.map((id) => [id, meshConfig(id, dbPath, { workers: 1, mesh: { reconnect: SCHEDULE, pingIntervalMs: 1_000, pongTimeoutMs: scaled(5_000) } })]));
const all = new Set<ServerProcess>();
let a: ServerProcess;
let b: ServerProcess;
let c: ServerProcess;

async function startB(): Promise<ServerProcess> {
  b = await startMeshServer(configs.get(B)!);
  all.add(b);
  return b;
}

async function fullMesh(): Promise<void> {
  await Promise.all([waitForPeers(a, [B, C]), waitForPeers(b, [A, C]), waitForPeers(c, [A, B])]);
}

const meshEvents = (server: ServerProcess, name: string, from: number) => server.events.slice(from).filter((event) => event.event === `mesh:${name}` && event.peer === B);
const waitForEvent = (server: ServerProcess, name: string, from: number, match: (event: ServerEvent) => boolean = () => true, timeoutMs = 20_000) =>
  server.waitFor((event) => event.event === `mesh:${name}` && event.peer === B && match(event), timeoutMs, from);

t.before(async () => {
  await startB();
  [a, c] = await Promise.all([startMeshServer(configs.get(A)!), startMeshServer(configs.get(C)!)]);
  all.add(a).add(c);
  await fullMesh();
});
t.teardown(() => Promise.all([...all].map((server) => server.stop())));

t.test('kill -9 of B: A and C retry on the SPEC 6.3 schedule, and the links re-form when B is back', async (t) => {
  const marks = [a.events.length, c.events.length];
  await b.stop();
  for (const [index, peer] of [a, c].entries()) {
    await waitForEvent(peer, 'link:close', marks[index]!);
    await until('4 reconnect attempts', () => (meshEvents(peer, 'reconnect', marks[index]!).length >= 4 ? true : undefined), 20_000, { everyMs: 100 }).catch(() => undefined);
    const attempts = meshEvents(peer, 'reconnect', marks[index]!);
    t.ok(attempts.length >= 4, `${peer === a ? 'A' : 'C'} retried at least 4 times`);
    t.same(attempts.slice(0, 4).map((event) => event.attempt), [0, 1, 2, 3], 'attempts count up from 0');
    for (const event of attempts) {
      const [low, high] = delayBounds(event.attempt as number);
      t.ok((event.delayMs as number) >= low && (event.delayMs as number) <= high, `attempt ${event.attempt}: delay ${event.delayMs} ms within [${low}, ${high}]`);
    }
    t.notOk(attempts.some((event) => event.code === 1000), 'an abnormal close is never taken for a goodbye');
  }

  // Back within the retry budget or not (then its new inventory record triggers a discovery), it is dialed again.
  await startB();
  await fullMesh();
  t.ok(a.count((event) => event.event === 'mesh:link:open' && event.peer === B) >= 2, 'A re-linked to B');
  t.ok(c.count((event) => event.event === 'mesh:link:open' && event.peer === B) >= 2, 'C re-linked to B');
});

t.test("B's SIGTERM (a stop or a service manager's restart: uncertain) closes its links with 1012 and peers retry", async (t) => {
  const marks = [a.events.length, c.events.length];
  b.signal('SIGTERM');
  t.equal(await b.exit(), 0, 'B exited 0');
  for (const [index, peer] of [a, c].entries()) {
    const closed = await waitForEvent(peer, 'link:close', marks[index]!);
    t.equal(closed.code, 1012, `${peer === a ? 'A' : 'C'} saw close code 1012`);
    await waitForEvent(peer, 'reconnect', marks[index]!, (event) => event.attempt === 1);
    t.pass(`${peer === a ? 'A' : 'C'} keeps retrying`);
  }
  await startB();
  await fullMesh();
  t.pass('B started again: the links re-formed');
});

t.test("B's explicit shutdown closes its links with 1000 and its peers stop retrying", async (t) => {
  const marks = [a.events.length, c.events.length];
  await b.command('shutdown');
  t.equal(await b.exit(), 0, 'B exited 0');
  for (const [index, peer] of [a, c].entries()) {
    const closed = await waitForEvent(peer, 'link:close', marks[index]!);
    t.equal(closed.code, 1000, `${peer === a ? 'A' : 'C'} saw close code 1000`);
  }
  // Well past the first delays of the schedule: a retrying dialer would have tried several times by now.
  await past(Date.now() + delayBounds(0)[1] + delayBounds(1)[1] + delayBounds(2)[1] + scaled(500));
  t.same(meshEvents(a, 'reconnect', marks[0]!), [], 'A never retried');
  t.same(meshEvents(c, 'reconnect', marks[1]!), [], 'C never retried');
  const record = (await a.command<any[]>('inventory')).find((entry) => entry._id === B);
  t.equal(record.master.status, 'stopped', 'B recorded itself stopped');
  t.same((await a.command<any[]>('mesh.peers')).map((peer) => peer.server), [C], 'A is linked to C only');

  await startB();
  await fullMesh();
  t.pass('B started again: discovery linked it back');
});

t.test("B's restart closes with 1012: peers retry and reconnect when it is back", async (t) => {
  const marks = [a.events.length, c.events.length];
  await b.command('restartPrimary');
  t.equal(await b.exit(), 75, 'B exited with the restart exit code');
  for (const [index, peer] of [a, c].entries()) {
    const closed = await waitForEvent(peer, 'link:close', marks[index]!);
    t.equal(closed.code, 1012, `${peer === a ? 'A' : 'C'} saw close code 1012`);
    await waitForEvent(peer, 'reconnect', marks[index]!, (event) => event.attempt === 1);
    t.pass(`${peer === a ? 'A' : 'C'} keeps retrying`);
  }
  // The service manager's part: start it again.
  await startB();
  await fullMesh();
  t.pass('links re-formed after the restart');
});
