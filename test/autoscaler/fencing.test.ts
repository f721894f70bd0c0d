import path from 'node:path';
import t, { type Test } from 'tap';
import { scaleActions } from '../../src/autoscaler/actions.js';
import { clusterNode } from '../../src/autoscaler/inventory.js';
import { unmanagedProviderPath } from '../../src/autoscaler/provider-path.js';
import { ScaleIn } from '../../src/autoscaler/scale-in.js';
import { Autoscaler } from '../../src/autoscaler/service.js';
import { EmbeddedStore } from '../../src/db/embedded/store.js';
import { FencedWriteRefused, type Fence } from '../../src/db/fence.js';
import { LEASES_COLLECTION, StoreLease, type LeaseClock } from '../../src/db/lease.js';
import type { Store } from '../../src/db/types.js';
import { deciderWrites } from '../../src/inventory/decider-writes.js';
import { serverRecords, type ServerRecord } from '../../src/inventory/records.js';
import type { RequestResult } from '../../src/ipc/handlers.js';
import type { ProviderRequest } from '../../src/manager/provider-port.js';
import { cuttableStore } from '../helpers/cuttable-store.js';
import { FakeClock, settle } from '../helpers/fake-clock.js';
import { tempDir } from '../helpers/server-process.js';

// Fencing by term on the embedded store: every write a cluster-wide decision makes carries the term it was decided
// in, and the store refuses it once a later holder of the lease wrote the record (or claimed the cluster's records).

const INTERVAL = 1_000;
const TTL = 3 * INTERVAL;
const SKEW = 500;
const COOLDOWN = 60_000;

const store = await EmbeddedStore.open(path.join(tempDir('fleetplane-fencing-'), 'store.db'));
t.teardown(() => store.close());
let clusters = 0;

const term = (lease: string, n: number): Fence => ({ lease, term: n });
const servers = serverRecords(store);
const record = (id: string) => servers.findOne({ _id: id });

/** A fresh cluster with running server records `ids` (no fence yet), and its decider writes. */
async function cluster(...ids: string[]) {
  const name = `fence-${clusters++}`;
  for (const [index, id] of ids.entries()) {
    await servers.insertOne({ _id: `${name}-${id}`, cluster_id: name, master: { status: 'running', createdAt: new Date(1_000 + index).toISOString(), servingSince: new Date(1_000).toISOString() } });
  }
  return { name, lease: `decider:${name}`, id: (id: string) => `${name}-${id}`, writes: deciderWrites(store, name) };
}

/** Scale actions of a cluster whose nodes answer every envelope, recording what each decider sent and asked. */
function actionsOf(name: string, scope: Pick<Store, 'collection'>, sent: string[], options: { create?: (request: ProviderRequest) => Promise<unknown>; onSend?: (line: string) => void } = {}) {
  const records = deciderWrites(scope, name);
  const path = unmanagedProviderPath({
    cluster: name,
    servers: () => serverRecords(scope),
    records,
    provider: {
      create: async (request) => (sent.push('provider create'), options.create ? options.create(request) : { instanceId: 'i-1' }),
      terminate: async (request) => (sent.push(`provider terminate ${String(request.data.server_id)}`), {}),
    },
    platformOrganization: async () => 'platform',
    clusterDocument: async () => ({ _id: name, organization_id: 'platform', initialDeployment: { cloud: 'test' } }),
    startup: () => ({}),
    clock: new FakeClock(),
  });
  return scaleActions({
    cluster: name,
    manager: { managed: false, send: async () => undefined },
    provider: path,
    request: async (envelope): Promise<RequestResult> => {
      const { method, server, data } = envelope as { method: string; server: string; data?: unknown };
      const line = `${method}${data === false ? ' off' : ''} ${server}`;
      sent.push(line);
      options.onSend?.(line);
      return { id: 'r', replies: [{ server, worker: 0, ok: true, result: null }], missing: [] };
    },
    records,
    drainTimeoutMs: 1_000,
    log: { info: () => undefined, warn: () => undefined },
  });
}

t.test('a stale holder whose status write arrives after a newer holder\'s is refused and changes nothing', async (t) => {
  const { lease, id, writes } = await cluster('b');
  t.equal(await writes.setStatus(id('b'), 'terminating', term(lease, 1)), 'written');
  t.match(await record(id('b')), { master: { status: 'terminating' }, fence: { lease, term: 1 } }, 'the record keeps the term that wrote it');
  t.equal(await writes.setStatus(id('b'), 'running', term(lease, 2)), 'written', 'a later term writes over an earlier one');
  const before = await record(id('b'));
  t.equal(await writes.setStatus(id('b'), 'failed', term(lease, 1)), 'refused', 'the earlier term, arriving late, is refused');
  t.same(await record(id('b')), before, 'and the record is as the later term left it');
  t.equal(await writes.setStatus(id('b'), 'failed', term(lease, 2)), 'written', 'the same term writes again');
  t.equal(await writes.setStatus(id('nobody'), 'failed', term(lease, 9)), 'missing', 'no such record: nothing written, nothing refused');
  await servers.updateOne({ _id: id('b') }, { $set: { fence: { lease: 'decider:an-old-cluster-name', term: 40 } } });
  t.equal(await writes.setStatus(id('b'), 'running', term(lease, 3)), 'written', "another lease's terms are not compared");
});

t.test("a new term's claim fences every record of the cluster: an earlier holder's writes are refused even where the new one wrote nothing, its sweep deletes nothing", async (t) => {
  const { name, lease, id, writes } = await cluster('b', 'c', 'd');
  const other = await cluster('x');
  const sent: string[] = [];
  const actions = actionsOf(name, store, sent);
  await actions.setStatus(id('c'), 'terminating', term(lease, 1));
  await actions.setStatus(id('d'), 'terminating', term(lease, 1));
  await actions.claim(term(lease, 2));
  t.match(await servers.find({ cluster_id: name }), [{ fence: { term: 2 } }, { fence: { term: 2 } }, { fence: { term: 2 } }], 'every record of the cluster carries the new term');
  t.notOk((await record(other.id('x')))?.fence, "another cluster's records are not touched");
  const before = await servers.find({ cluster_id: name }, { sort: { _id: 1 } });
  await t.rejects(actions.claim(term(lease, 1)), FencedWriteRefused, 'an earlier term cannot claim them back');
  await t.rejects(actions.setStatus(id('b'), 'terminating', term(lease, 1)), FencedWriteRefused, 'a record the new holder never wrote refuses the earlier term');
  await t.rejects(actions.setStatus(id('c'), 'running', term(lease, 1)), FencedWriteRefused);
  await t.rejects(actions.sweep(term(lease, 1)), FencedWriteRefused, "the earlier holder's sweep is refused");
  t.same(await servers.find({ cluster_id: name }, { sort: { _id: 1 } }), before, 'nothing changed, nothing deleted');
  t.equal(await actions.sweep(term(lease, 2)), 2, "the new holder's sweep deletes the terminating records");
  t.same((await servers.find({ cluster_id: name })).map((found) => found._id), [id('b')]);
  t.equal(await writes.claim(term(lease, 3)), true);
});

t.test('a scale-in whose node a later term claimed during the removal notice stops before the provider request: the node back in service', async (t) => {
  const { name, lease, id, writes } = await cluster('a', 'c');
  const clock = new FakeClock(1_000_000);
  const sent: string[] = [];
  const scaleIn = new ScaleIn({ serverId: id('a'), actions: actionsOf(name, store, sent), clock, removalNoticeMs: 5_000, log: { info: () => undefined, warn: () => undefined } }, id('c'), term(lease, 1));
  const outcome = t.rejects(scaleIn.run(() => false), FencedWriteRefused);
  await waitFor(() => clock.pending > 0);
  t.match(await record(id('c')), { master: { status: 'terminating' }, fence: { term: 1 } }, 'drained, terminating committed, the notice runs');
  t.equal(await writes.claim(term(lease, 2)), true, 'another server took the lease over and claimed the cluster');
  await clock.advanceAsync(5_000);
  await outcome;
  t.same(sent, [`drain ${id('c')}`, `drain off ${id('c')}`], 'no provider request, no removal: the node serves again');
  t.match(await record(id('c')), { master: { status: 'terminating' }, fence: { term: 2 } }, 'its record is the new holder\'s to sweep');
});

t.test("a scale-out whose provider answers after a later term claimed the cluster: the instance is not recorded by the earlier holder, which is told", async (t) => {
  const { name, lease, writes } = await cluster('a');
  const sent: string[] = [];
  let answer!: (reply: unknown) => void;
  const actions = actionsOf(name, store, sent, { create: () => new Promise((resolve) => (answer = resolve)) });
  const scaling = actions.scaleOut('below-min', term(lease, 1));
  await t.resolves(waitFor(() => sent.includes('provider create')));
  const created = (await servers.findOne({ cluster_id: name, 'master.status': 'starting' }))!;
  t.match(created, { fence: { term: 1 } }, 'the new record carries the term of the scale-out');
  await writes.claim(term(lease, 2));
  answer({ instanceId: 'i-late' });
  await t.rejects(scaling, { name: 'FencedWriteRefused', message: /recording instance i-late of provider "test" in the record of/ });
  t.match(await record(created._id), { master: { status: 'starting' }, fence: { term: 2 } });
  t.notOk((await record(created._id))?.infrastructure, 'nothing of the late answer in it');
});

/** Polls `check` between promise turns (no clock involved) until it holds. */
async function waitFor(check: () => boolean): Promise<void> {
  for (let turn = 0; turn < 1_000 && !check(); turn++) await settle();
  if (!check()) throw new Error(`not reached: ${String(check)}`);
}

interface Decider {
  scaler: Autoscaler;
  lease: StoreLease;
  sent: string[];
  logs: string[];
}

/** One deciding server of cluster `name` on the shared store (through `scope`), its clock `offsetMs` ahead. */
function decider(t: Test, name: string, serverId: string, clock: FakeClock, offsetMs: number, options: { scope?: Pick<Store, 'collection'>; onSend?: (line: string) => void } = {}): Decider {
  const scope = options.scope ?? store;
  const own: LeaseClock = { now: () => clock.now() + offsetMs, setTimeout: (fn, ms) => clock.setTimeout(fn, ms) };
  const lease = new StoreLease({ store: scope, name: `decider:${name}`, owner: serverId, ttlMs: TTL, maxClockSkewMs: SKEW, clock: own });
  const sent: string[] = [];
  const logs: string[] = [];
  const idle = () => [{ at: own.now(), cpu: 5, memory: 5 }];
  const scaler = new Autoscaler({
    serverId,
    clock: own,
    intervalMs: INTERVAL,
    sweepIntervalMs: 600_000,
    sample: () => idle()[0],
    inventory: {
      nodes: async () => (await serverRecords(scope).find({ cluster_id: name }, { limit: 0 })).map((found) => clusterNode(found as ServerRecord)),
      policy: async () => ({ minClusterSize: 1, maxClusterSize: 5, cooldownMs: COOLDOWN, windowMs: 5_000 }),
      setPaused: async () => undefined,
    },
    gather: async (ids) => new Map(ids.map((id) => [id, idle()])),
    actions: actionsOf(name, scope, sent, options.onSend ? { onSend: options.onSend } : {}),
    lease,
    log: { info: (_fields, message) => void logs.push(message), warn: (_fields, message) => void logs.push(`warn: ${message}`) },
  });
  t.teardown(() => scaler.stop());
  return { scaler, lease, sent, logs };
}

const leaseOf = (name: string) => store.collection(LEASES_COLLECTION).findOne({ _id: `decider:${name}` });

t.test('two deciders, the taker\'s clock ahead by more than maxClockSkewMs: it takes the lease while the holder still believes it holds it, and the holder\'s late write is refused, nothing changed', async (t) => {
  const { name, id } = await cluster('a', 'b', 'c');
  const clock = new FakeClock(1_000_000);
  const link = cuttableStore(store);
  // a decides the scale-in of c (the newest); its link to the store drops as it drains c, before terminating is sent.
  const a = decider(t, name, id('a'), clock, 0, { scope: link.store, onSend: (line) => line === `drain ${id('c')}` && link.cut() });
  a.scaler.start();
  while (!a.sent.includes(`drain ${id('c')}`)) await clock.advanceAsync(INTERVAL / 4);
  t.match(await leaseOf(name), { owner: id('a'), term: 1 });
  const b = decider(t, name, id('b'), clock, SKEW + 2_000);
  b.scaler.start();
  const fenceOf = async (server: string) => (await record(server))?.fence as Fence | undefined;
  while ((await fenceOf(id('c')))?.term !== 2) await clock.advanceAsync(INTERVAL / 4);
  t.match(await leaseOf(name), { owner: id('b'), term: 2 }, 'b took the lease over and claimed the cluster');
  t.equal(a.lease.held(), true, 'while a, its clock behind, still believes it holds the lease');
  const claimed = await record(id('c'));
  t.match(claimed, { master: { status: 'running' } });

  link.restore();
  await a.scaler.settled();
  await settle();
  t.same(await record(id('c')), claimed, "a's terminating, sent before the cut and arriving now, was refused: c's record is as b claimed it");
  t.same(a.sent, [`drain ${id('c')}`, `drain off ${id('c')}`], 'a asked no provider and stopped no node: c serves again');
  t.match((await a.scaler.status()).lastAction, { action: 'scale-in', serverId: id('c'), outcome: 'refused' });
  t.equal((await a.scaler.status()).deciding, false, 'a stopped deciding');
  t.ok(a.logs.some((line) => /^warn: autoscaler stopped: marking .*-c terminating refused: a term after 1 of decider:/.test(line)), 'and said why');
  t.match(await b.scaler.status(), { deciding: true, lease: { owner: id('b'), term: 2 } });
  await clock.advanceAsync(5 * INTERVAL);
  t.equal(b.sent.length, 0, "b holds back for the cooldown of a's recorded decision");
});
