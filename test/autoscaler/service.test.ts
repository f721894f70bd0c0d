import path from 'node:path';
import t, { type Test } from 'tap';
import { Autoscaler, type AutoscalerDeps, type ScaleActions } from '../../src/autoscaler/service.js';
import type { ClusterNode, Sample } from '../../src/autoscaler/decide.js';
import { tenantViolation } from '../../src/auth/authority.js';
import { EmbeddedStore } from '../../src/db/embedded/store.js';
import { FencedWriteRefused } from '../../src/db/fence.js';
import { LEASES_COLLECTION, StoreLease } from '../../src/db/lease.js';
import type { Store } from '../../src/db/types.js';
import { cuttableStore } from '../helpers/cuttable-store.js';
import { FakeClock, settle } from '../helpers/fake-clock.js';
import { tempDir } from '../helpers/server-process.js';

const INTERVAL = 1_000;
const COOLDOWN = 60_000;
const SWEEP = 600_000;
const POLICY = { minClusterSize: 1, maxClusterSize: 3, cooldownMs: COOLDOWN, windowMs: 5_000 };
const LEASE_TTL = 3 * INTERVAL;

// The decider leases of every test, in one real store; each test's cluster has a lease of its own.
const store = await EmbeddedStore.open(path.join(tempDir('fleetplane-autoscaler-service-'), 'store.db'));
t.teardown(() => store.close());
let clusters = 0;

interface Fleet {
  clock: FakeClock;
  scaler: Autoscaler;
  nodes: ClusterNode[];
  steps: string[];
  logs: string[];
  metrics: string[];
  load: { cpu: number; memory: number };
  peerLoad: Map<string, { cpu: number; memory: number }>;
  actions: ScaleActions;
  /** The cluster document's `autoscaler` section (undefined: none). */
  policy: { current: Record<string, unknown> | undefined };
  organization: { inactive: boolean };
  lease: StoreLease;
  /** Every warning, with its fields. */
  warnings: Array<{ fields: Record<string, unknown>; message: string }>;
  /** Set: every read of the inventory fails with this message. */
  inventoryFailure: { message?: string };
  /** The claims the autoscaler made, in order: `cluster <term>` for all of the cluster's records, `<id> <term>` for one. */
  claims: string[];
}

/** A cluster as the deciding server `a` sees it: fake inventory, peers, provider and clock. */
function fleet(
  options: { nodes?: ClusterNode[]; serverId?: string; actions?: Partial<ScaleActions>; policy?: Record<string, unknown>; clock?: FakeClock; cluster?: string; removalNoticeMs?: number; leaseStore?: Pick<Store, 'collection'> } = {},
): Fleet {
  const clock = options.clock ?? new FakeClock(1_000_000);
  const lease = new StoreLease({ store: options.leaseStore ?? store, name: `decider:${options.cluster ?? `cluster-${clusters++}`}`, owner: options.serverId ?? 'a', ttlMs: LEASE_TTL, maxClockSkewMs: 500, clock });
  const steps: string[] = [];
  const logs: string[] = [];
  const metrics: string[] = [];
  const nodes = options.nodes ?? [
    { id: 'a', status: 'running', createdAt: 1 },
    { id: 'b', status: 'running', createdAt: 2 },
  ];
  const load = { cpu: 50, memory: 50 };
  const policy: Fleet['policy'] = { current: { ...POLICY, ...options.policy } };
  const organization = { inactive: false };
  const warnings: Fleet['warnings'] = [];
  const inventoryFailure: Fleet['inventoryFailure'] = {};
  const peerLoad = new Map<string, { cpu: number; memory: number }>();
  const claims: string[] = [];
  const actions: ScaleActions = {
    claim: async (fence) => void claims.push(`cluster ${fence.term}`),
    claimServer: async (id, fence) => void claims.push(`${id} ${fence.term}`),
    scaleOut: async (reason) => {
      steps.push(`scale-out ${reason}`);
      nodes.push({ id: `n${nodes.length}`, status: 'pending', createdAt: clock.now() });
    },
    drain: async (id) => (steps.push(`drain ${id}`), true),
    undrain: async (id) => void steps.push(`undrain ${id}`),
    setStatus: async (id, status) => {
      steps.push(`status ${id} ${status}`);
      const node = nodes.find((candidate) => candidate.id === id);
      if (node) node.status = status;
    },
    terminate: async (id) => void steps.push(`terminate ${id}`),
    shutdown: async (id) => void steps.push(`shutdown ${id}`),
    sweep: async () => (steps.push('sweep'), 0),
    ...options.actions,
  };
  const deps: AutoscalerDeps = {
    serverId: options.serverId ?? 'a',
    clock,
    intervalMs: INTERVAL,
    sweepIntervalMs: SWEEP,
    ...(options.removalNoticeMs === undefined ? {} : { removalNoticeMs: options.removalNoticeMs }),
    sample: () => ({ at: clock.now(), ...load }),
    inventory: {
      nodes: async () => {
        if (inventoryFailure.message) throw new Error(inventoryFailure.message);
        return nodes.map((node) => ({ ...node }));
      },
      policy: async () => policy.current,
      setPaused: async (paused) => {
        if (!policy.current) throw new Error('no autoscaler section');
        policy.current = { ...policy.current, paused };
      },
      organizationInactive: () => organization.inactive,
    },
    gather: async (ids) => {
      steps.push(`gather ${ids.join(',')}`);
      return new Map(ids.map((id): [string, Sample[]] => [id, [{ at: clock.now(), ...(peerLoad.get(id) ?? load) }]]));
    },
    actions,
    lease,
    log: { info: (_fields, message) => logs.push(message), warn: (fields, message) => void (logs.push(message), warnings.push({ fields, message })) },
    metrics: { action: (action, reason) => metrics.push(`${action} ${reason}`), size: (current, desired) => metrics.push(`size ${current}->${desired}`) },
  };
  return { clock, scaler: new Autoscaler(deps), nodes, steps, logs, metrics, load, peerLoad, actions, policy, organization, lease, warnings, inventoryFailure, claims };
}

/** An idle cluster whose scale-in of `b` has drained it and recorded it terminating: its removal notice runs. */
async function inRemovalNotice(t: Test, removalNoticeMs: number): Promise<Fleet> {
  const f = fleet({ removalNoticeMs });
  f.scaler.start();
  t.teardown(() => f.scaler.stop());
  f.load.cpu = 5;
  f.load.memory = 5;
  await f.clock.advanceAsync(INTERVAL);
  t.same(f.steps, ['gather b', 'drain b', 'status b terminating'], 'drained and recorded terminating, the provider not asked yet');
  return f;
}

/** Another server takes the decider lease (this one's renewals were lost: the store is shared, the mesh is not). */
const takeLeaseElsewhere = (f: Fleet) =>
  store.collection(LEASES_COLLECTION).updateOne({ _id: f.lease.name }, { $set: { token: 'another-holder', owner: 'c', expiresAt: f.clock.now() + 3_600_000 } });

const run = async (f: Fleet, ms: number) => {
  await f.clock.advanceAsync(ms);
  await f.scaler.settled();
  await settle();
};

t.test('scale-out: a created server counts while pending, so the cluster does not grow twice', async (t) => {
  const f = fleet();
  f.scaler.start();
  t.teardown(() => f.scaler.stop());
  f.load.cpu = 95;
  await run(f, INTERVAL);
  t.same(f.steps.filter((step) => step.startsWith('scale-out')), ['scale-out cpu']);
  t.same(f.metrics.filter((m) => !m.startsWith('size')), ['scale-out cpu'], 'the action is counted with its reason');
  t.ok(f.metrics.includes('size 2->3'), 'current and desired sizes are reported');
  await run(f, COOLDOWN + INTERVAL);
  t.same(f.steps.filter((step) => step.startsWith('scale-out')), ['scale-out cpu'], 'no second scale-out while the new server is pending, cooldown or not');
  t.equal((await f.scaler.status()).lastDecision?.reason, 'a new server is not confirmed yet');
});

t.test('scale-in: drain, terminating committed, provider request, shutdown, in that order', async (t) => {
  const f = fleet();
  f.scaler.start();
  t.teardown(() => f.scaler.stop());
  f.load.cpu = 5;
  f.load.memory = 5;
  await run(f, INTERVAL);
  t.same(f.steps, ['gather b', 'drain b', 'status b terminating', 'terminate b', 'shutdown b']);
  t.match((await f.scaler.status()).lastAction, { action: 'scale-in', reason: 'idle', serverId: 'b', outcome: 'done' });
});

t.test('scale-in with a removal notice: the provider is asked only once the notice has passed since terminating was committed', async (t) => {
  const NOTICE = 2_000;
  const f = await inRemovalNotice(t, NOTICE);
  await f.clock.advanceAsync(NOTICE - 1);
  t.notOk(f.steps.includes('terminate b'), 'not before the whole notice');
  await f.clock.advanceAsync(1);
  await f.scaler.settled();
  t.same(f.steps, ['gather b', 'drain b', 'status b terminating', 'terminate b', 'shutdown b']);
  t.match((await f.scaler.status()).lastAction, { action: 'scale-in', serverId: 'b', outcome: 'done' });
});

t.test('stopped during the removal notice: the notice ends at once, the node goes back to running and into service, no provider request', async (t) => {
  const f = await inRemovalNotice(t, 60_000);
  // No time passes: the stop itself ends the notice.
  await f.scaler.stop();
  t.same(f.steps, ['gather b', 'drain b', 'status b terminating', 'status b running', 'undrain b']);
  t.equal(f.nodes.find((node) => node.id === 'b')?.status, 'running');
  t.match((await f.scaler.status()).lastAction, { outcome: 'cancelled', error: 'stopped before the provider request' });
});

t.test('only the holder of the decider lease decides, whatever its id; the others only sample', async (t) => {
  const clock = new FakeClock(1_000_000);
  const nodes: ClusterNode[] = [
    { id: 'a', status: 'running', createdAt: 1 },
    { id: 'b', status: 'running', createdAt: 2 },
  ];
  const holder = fleet({ serverId: 'b', nodes, clock, cluster: 'shared-1' });
  const other = fleet({ serverId: 'a', nodes, clock, cluster: 'shared-1' });
  holder.scaler.start();
  await run(holder, INTERVAL);
  other.scaler.start();
  t.teardown(() => Promise.all([holder.scaler.stop(), other.scaler.stop()]));
  other.load.cpu = 95;
  await run(other, 5 * INTERVAL);
  t.same(other.steps, [], 'the lowest id does not gather, nor act: it does not hold the lease');
  t.equal((await other.scaler.status()).deciding, false);
  t.match((await other.scaler.status()).lease, { owner: 'b', term: 1 }, 'its status names the holder');
  t.equal((await holder.scaler.status()).deciding, true);
  t.equal(other.scaler.signals().length, 5, 'its samples are there for the deciding server to gather');
});

t.test('a hand-over keeps the cooldown: the next holder reads the last action from the lease', async (t) => {
  const clock = new FakeClock(1_000_000);
  const nodes: ClusterNode[] = [
    { id: 'a', status: 'running', createdAt: 1 },
    { id: 'b', status: 'running', createdAt: 2 },
  ];
  // Below its minimum, the cluster wants a new server every cooldown, pending or not.
  const policy = { minClusterSize: 6, maxClusterSize: 9 };
  const first = fleet({ serverId: 'a', nodes, clock, cluster: 'shared-2', policy });
  const second = fleet({ serverId: 'b', nodes, clock, cluster: 'shared-2', policy });
  second.policy.current = undefined;
  Object.defineProperty(second.policy, 'current', { get: () => first.policy.current });
  first.scaler.start();
  await run(first, INTERVAL);
  second.scaler.start();
  t.teardown(() => second.scaler.stop());
  t.same(first.steps.filter((step) => step.startsWith('scale-out')), ['scale-out below-min']);
  const actedAt = clock.now();
  await run(first, 2 * INTERVAL);
  await first.scaler.stop();
  await run(second, 2 * INTERVAL);
  t.equal((await second.scaler.status()).deciding, true, 'the stopped holder released the lease: the other took it at once');
  t.match((await second.scaler.status()).lease, { owner: 'b', term: 2 });
  t.equal((await second.scaler.status()).lastDecision?.reason, 'cooldown', "the first holder's action holds the new holder back");
  await run(second, actedAt + COOLDOWN - clock.now() - INTERVAL);
  t.same(second.steps.filter((step) => step.startsWith('scale-out')), [], 'nothing inside the cooldown');
  await run(second, 2 * INTERVAL);
  t.same(second.steps.filter((step) => step.startsWith('scale-out')), ['scale-out below-min'], 'one action once it passed');
});

t.test('a holder that loses the lease stops acting at once: a scale-in before its provider request is cancelled', async (t) => {
  let release!: () => void;
  const f = fleet({ actions: { drain: (id) => new Promise((resolve) => (release = () => resolve(true), void f.steps.push(`drain ${id}`))) } });
  f.scaler.start();
  t.teardown(() => f.scaler.stop());
  f.load.cpu = 5;
  f.load.memory = 5;
  await f.clock.advanceAsync(INTERVAL);
  t.same(f.steps, ['gather b', 'drain b']);
  await takeLeaseElsewhere(f);
  await f.clock.advanceAsync(LEASE_TTL);
  t.equal(f.lease.held(), false, 'the renewal found the lease taken');
  t.ok(f.logs.includes('autoscaler lost the decider lease: another server decides for the cluster'));
  release();
  await f.scaler.settled();
  t.same(f.steps, ['gather b', 'drain b', 'undrain b'], 'no terminating, no provider request: the node serves again');
  t.match((await f.scaler.status()).lastAction, { outcome: 'cancelled' });
  f.load.cpu = 95;
  await run(f, 5 * INTERVAL);
  t.same(f.steps.filter((step) => step.startsWith('gather')), ['gather b'], 'and it decides nothing more');
  t.equal((await f.scaler.status()).deciding, false);
});

t.test('a holder cut from the store stops acting within its TTL: its lease runs out on its own clock and the scale-in in its removal notice is cancelled', async (t) => {
  const link = cuttableStore(store);
  const f = fleet({ removalNoticeMs: 10 * LEASE_TTL, leaseStore: link.store });
  f.scaler.start();
  t.teardown(() => (link.restore(), f.scaler.stop()));
  f.load.cpu = 5;
  f.load.memory = 5;
  await f.clock.advanceAsync(INTERVAL);
  t.same(f.steps, ['gather b', 'drain b', 'status b terminating'], 'in the removal notice');
  const cutAt = f.clock.now();
  link.cut();
  while (!f.steps.includes('undrain b') && f.clock.now() - cutAt < 2 * LEASE_TTL) await f.clock.advanceAsync(100);
  t.ok(f.clock.now() - cutAt <= LEASE_TTL, `stopped ${f.clock.now() - cutAt} ms after the store stopped answering (TTL ${LEASE_TTL} ms)`);
  t.equal(f.lease.held(), false);
  t.ok(f.logs.includes('autoscaler lost the decider lease: it ran out before a renewal reached the store (this server stopped deciding)'));
  await f.scaler.settled();
  t.same(f.steps, ['gather b', 'drain b', 'status b terminating', 'status b running', 'undrain b'], 'back to running and into service, no provider request');
});

t.test("a new holder claims the cluster's records before its first decision; a claim the store refuses stops it", async (t) => {
  const f = fleet({ actions: { claim: async (fence) => void f.steps.push(`claim ${fence.term}`) } });
  f.scaler.start();
  t.teardown(() => f.scaler.stop());
  await run(f, 3 * INTERVAL);
  t.same(f.steps, ['claim 1', 'gather b', 'gather b', 'gather b'], 'once per term, first');

  const refused = fleet({ actions: { claim: async (fence) => Promise.reject(new FencedWriteRefused(fence, 'the claim')) } });
  refused.scaler.start();
  t.teardown(() => refused.scaler.stop());
  await run(refused, 3 * INTERVAL);
  t.same(refused.steps, [], 'no decision, ever');
  t.equal((await refused.scaler.status()).deciding, false);
  t.ok(refused.logs.some((line) => /^autoscaler stopped: the claim refused: a term after 1 of decider:/.test(line)));
  t.ok(refused.logs.includes('autoscaler lost the decider lease: the store refused a write of its term, another server decides for the cluster'));
});

t.test('a holder that loses the lease during the removal notice ends it at once: back to running, into service, no provider request', async (t) => {
  const f = await inRemovalNotice(t, 60_000);
  await takeLeaseElsewhere(f);
  await f.clock.advanceAsync(LEASE_TTL);
  await f.scaler.settled();
  t.equal(f.lease.held(), false, 'the renewal found the lease taken, long before the notice would end');
  t.same(f.steps, ['gather b', 'drain b', 'status b terminating', 'status b running', 'undrain b'], 'the node serves again; the new holder decides');
  t.match((await f.scaler.status()).lastAction, { outcome: 'cancelled', error: 'stopped before the provider request' });
});

t.test('a server whose own record is not running does not take the lease; one that holds it gives it up', async (t) => {
  const nodes: ClusterNode[] = [
    { id: 'a', status: 'pending', createdAt: 1 },
    { id: 'b', status: 'running', createdAt: 2 },
  ];
  const f = fleet({ nodes });
  f.scaler.start();
  t.teardown(() => f.scaler.stop());
  await run(f, 3 * INTERVAL);
  t.equal(await f.lease.read(), null, 'a server not yet confirmed does not decide');
  nodes[0]!.status = 'running';
  await run(f, INTERVAL);
  t.equal(f.lease.held(), true);
  nodes[0]!.status = 'stopped';
  await run(f, INTERVAL);
  t.equal(f.lease.held(), false);
  t.match(await f.lease.read(), { owner: 'a', expiresAt: 0 }, 'released, for another to take at once');
});

t.test('a scale-out the provider refuses: one warning with its reason, then attempts back off until one succeeds', async (t) => {
  const refusal = 'provider "local" answered 400 to create: data.startup.server: is required';
  let refuse = true;
  const f = fleet({ policy: { minClusterSize: 3 }, actions: { scaleOut: async (reason) => {
    f.steps.push(`scale-out ${reason}`);
    if (refuse) throw new Error(refusal);
    f.nodes.push({ id: `n${f.nodes.length}`, status: 'pending', createdAt: f.clock.now() });
  } } });
  const { warnings } = f;
  f.scaler.start();
  t.teardown(() => f.scaler.stop());
  const attempts: number[] = [];
  for (let elapsed = 0; elapsed < 8 * COOLDOWN; elapsed += INTERVAL) {
    const before = f.steps.length;
    await run(f, INTERVAL);
    if (f.steps.slice(before).some((step) => step.startsWith('scale-out'))) attempts.push(f.clock.now());
  }
  const gaps = attempts.slice(1).map((at, index) => (at - attempts[index]!) / COOLDOWN);
  t.same(gaps, [1, 2, 4], 'a cooldown after the first failure, then twice as long each time');
  t.equal(warnings.length, attempts.length, 'one warning per attempt: never more than one per cooldown');
  t.match(warnings[0], { message: `autoscaler scale-out failed: ${refusal}`, fields: { action: { outcome: 'failed' } } }, "the provider's reason, with its status");
  await run(f, COOLDOWN);
  t.match((await f.scaler.status()).lastDecision, { action: 'none', reason: 'backing off after 4 failed scale-out attempts' }, 'past the cooldown, the backoff holds it');
  refuse = false;
  await run(f, 8 * COOLDOWN);
  t.equal((await f.scaler.status()).lastAction?.outcome, 'done', 'it succeeds once the provider accepts');
  t.equal(f.nodes.filter((node) => node.status === 'pending').length, 1);
});

t.test('a failure repeated every interval is one warning per cooldown, each distinct reason its own, with the count held back', async (t) => {
  const f = fleet();
  const { warnings } = f;
  f.scaler.start();
  t.teardown(() => f.scaler.stop());
  // One evaluation reads the policy: its cooldown is the window.
  await run(f, INTERVAL);
  f.inventoryFailure.message = 'the database stayed locked by another process';
  await run(f, COOLDOWN - INTERVAL);
  t.same(warnings.map((warning) => warning.message), ['autoscaler evaluation failed: the database stayed locked by another process'], 'once in the first cooldown, though every interval failed');
  f.inventoryFailure.message = 'the store is closed';
  await run(f, INTERVAL);
  t.equal(warnings.length, 2, 'a new reason is warned at once');
  f.inventoryFailure.message = 'the database stayed locked by another process';
  await run(f, COOLDOWN);
  t.equal(warnings.length, 3);
  t.match(warnings[2], { message: /stayed locked/, fields: { repeated: 58 } }, 'the next warning says how many the gate held back');
});

t.test('a provider that fails the terminate: failed, back in service, counted, and never picked again', async (t) => {
  const f = fleet({ actions: { terminate: async () => Promise.reject(new Error('provider said no')) } });
  f.scaler.start();
  t.teardown(() => f.scaler.stop());
  f.load.cpu = 5;
  f.load.memory = 5;
  await run(f, INTERVAL);
  t.same(f.steps, ['gather b', 'drain b', 'status b terminating', 'status b failed', 'undrain b'], 'the node that is still there serves again');
  t.match((await f.scaler.status()).lastAction, { outcome: 'failed', error: 'provider said no' });
  t.ok(f.logs.some((line) => /scale-in failed: provider said no/.test(line)), 'the failure is logged');
  await run(f, COOLDOWN - 2 * INTERVAL);
  t.equal(f.steps.filter((step) => step.startsWith('drain')).length, 1, 'no second attempt inside the cooldown');
  await run(f, 2 * COOLDOWN);
  t.equal(f.steps.filter((step) => step.startsWith('drain')).length, 1, 'nor after it: a failed server is left for people');
  t.equal(f.steps.filter((step) => step.startsWith('scale-out')).length, 0, 'and no scale-out replaces it: it counts toward the size');
  t.match((await f.scaler.status()).lastDecision, { action: 'none', current: 2 });
  t.same(f.steps.filter((step) => step.startsWith('gather')).at(-1), 'gather b', 'its signals are still gathered: it serves');
});

t.test('a failed server does not hold the cluster below its minimum by counting, nor is it replaced', async (t) => {
  const f = fleet({ nodes: [{ id: 'a', status: 'running', createdAt: 1 }, { id: 'b', status: 'failed', createdAt: 2 }], policy: { minClusterSize: 2 } });
  f.scaler.start();
  t.teardown(() => f.scaler.stop());
  await run(f, 3 * INTERVAL);
  t.same(f.steps.filter((step) => !step.startsWith('gather')), [], 'min 2 is met by the running and the failed server');
  f.nodes.find((node) => node.id === 'b')!.status = 'terminating';
  await run(f, INTERVAL);
  t.same(f.steps.filter((step) => !step.startsWith('gather')), ['scale-out below-min'], 'once it is really going, the cluster grows back to its minimum');
});

t.test('a node that disappears during its drain: the action is cancelled and logged, nothing terminated', async (t) => {
  const f = fleet({ actions: { drain: async () => false } });
  f.scaler.start();
  t.teardown(() => f.scaler.stop());
  f.load.cpu = 5;
  f.load.memory = 5;
  await run(f, INTERVAL);
  t.same(f.steps, ['gather b']);
  t.match((await f.scaler.status()).lastAction, { outcome: 'cancelled', serverId: 'b' });
  t.ok(f.logs.some((line) => /scale-in cancelled: server b disappeared during the drain/.test(line)));
});

t.test('a drain refused or timed out half-way: the node is taken back into service, the action failed, nothing terminated', async (t) => {
  const f = fleet({ actions: { drain: async (id) => (f.steps.push(`drain ${id}`), Promise.reject(new Error('worker.drain: no reply in time'))) } });
  f.scaler.start();
  t.teardown(() => f.scaler.stop());
  f.load.cpu = 5;
  f.load.memory = 5;
  await run(f, INTERVAL);
  t.same(f.steps, ['gather b', 'drain b', 'undrain b']);
  t.match((await f.scaler.status()).lastAction, { outcome: 'failed', serverId: 'b', error: 'worker.drain: no reply in time' });
});

t.test('stopped during the drain: the node goes back to running, no provider request', async (t) => {
  let release!: () => void;
  const f = fleet({ actions: { drain: (id) => new Promise((resolve) => (release = () => resolve(true), void f.steps.push(`drain ${id}`))) } });
  f.scaler.start();
  f.load.cpu = 5;
  f.load.memory = 5;
  await f.clock.advanceAsync(INTERVAL);
  t.same(f.steps, ['gather b', 'drain b']);
  const stopped = f.scaler.stop();
  release();
  await stopped;
  t.same(f.steps, ['gather b', 'drain b', 'undrain b']);
  t.match((await f.scaler.status()).lastAction, { outcome: 'cancelled' });
});

t.test('paused: written to the cluster document, so it holds for whichever server decides; samples go on', async (t) => {
  const nodes: ClusterNode[] = [
    { id: 'a', status: 'running', createdAt: 1 },
    { id: 'b', status: 'running', createdAt: 2 },
  ];
  const first = fleet({ nodes });
  // `b` shares the cluster document (and its inventory) with `a`, as two servers of one cluster share the store.
  const second = fleet({ nodes, serverId: 'b' });
  second.policy.current = undefined;
  Object.defineProperty(second.policy, 'current', { get: () => first.policy.current, set: (value) => (first.policy.current = value) });
  first.scaler.start();
  t.teardown(() => first.scaler.stop());
  t.equal((await second.scaler.pause()).paused, true, 'paused through the server that does not decide');
  t.equal(first.policy.current?.paused, true, 'the pause is in the cluster document');
  first.load.cpu = 95;
  await run(first, 3 * INTERVAL);
  t.same(first.steps.filter((step) => step.startsWith('scale-out')), []);
  t.equal((await first.scaler.status()).lastDecision?.reason, 'paused', 'the deciding server holds still');
  t.equal((await first.scaler.status()).paused, true);
  t.equal(first.scaler.signals().length, 3, 'samples are still taken');
  // The deciding server goes away: the one that decides next reads the same pause.
  nodes.shift();
  second.scaler.start();
  t.teardown(() => second.scaler.stop());
  second.load.cpu = 95;
  await run(second, 2 * INTERVAL);
  t.equal((await second.scaler.status()).deciding, true);
  t.equal((await second.scaler.status()).lastDecision?.reason, 'paused', 'the new deciding server is paused too');
  t.equal((await first.scaler.resume()).paused, false);
  await run(second, INTERVAL);
  t.same(second.steps.filter((step) => step.startsWith('scale-out')), ['scale-out cpu']);
});

t.test('pause on a cluster without a policy is refused and changes nothing', async (t) => {
  const f = fleet();
  f.policy.current = undefined;
  await t.rejects(f.scaler.pause(), /no autoscaler section/);
  t.equal(f.policy.current, undefined);
});

t.test('scale to zero: the last server, its organization inactive, drains itself, commits terminating and asks for its own removal', async (t) => {
  const f = fleet({
    nodes: [{ id: 'a', status: 'running', createdAt: 1 }],
    policy: { minClusterSize: 0 },
    actions: {
      terminate: (id, signal) =>
        new Promise<void>((_resolve, reject) => {
          f.steps.push(`terminate ${id}`);
          signal?.addEventListener('abort', () => reject(new Error('the request was given up')));
        }),
    },
  });
  f.scaler.start();
  f.load.cpu = 1;
  f.load.memory = 1;
  await run(f, 2 * INTERVAL);
  t.same(f.steps, [], 'CPU and memory alone never remove the last server');
  f.organization.inactive = true;
  await f.clock.advanceAsync(INTERVAL);
  await settle();
  t.same(f.steps, ['drain a', 'status a terminating', 'terminate a']);
  // The provider stops this process while its request is still out: the shutdown gives the request up rather
  // than wait for an answer that comes once the process is gone, and that is no refusal.
  await f.scaler.stop();
  await f.scaler.settled();
  t.same(f.steps, ['drain a', 'status a terminating', 'terminate a'], 'no failed, no undrain, no second shutdown');
  t.match((await f.scaler.status()).lastAction, { action: 'scale-in', reason: 'organization-inactive', serverId: 'a', outcome: 'done' });
});

t.test('scale to zero refused by the provider while this server still runs: failed, and back in service', async (t) => {
  const f = fleet({ nodes: [{ id: 'a', status: 'running', createdAt: 1 }], policy: { minClusterSize: 0 }, actions: { terminate: async () => Promise.reject(new Error('provider said no')) } });
  f.scaler.start();
  t.teardown(() => f.scaler.stop());
  f.organization.inactive = true;
  await run(f, INTERVAL);
  t.same(f.steps, ['drain a', 'status a terminating', 'status a failed', 'undrain a']);
});

t.test('missing signals from a peer: no scale-out from partial data', async (t) => {
  const f = fleet();
  f.scaler.start();
  t.teardown(() => f.scaler.stop());
  f.load.cpu = 95;
  f.peerLoad.set('b', { cpu: Number.NaN, memory: Number.NaN });
  await run(f, 3 * INTERVAL);
  t.same(f.steps.filter((step) => step.startsWith('scale-out')), []);
  t.equal((await f.scaler.status()).lastDecision?.reason, 'signals missing from a server');
});

t.test('the sweep runs every sweep interval, the first one after a full interval', async (t) => {
  const f = fleet();
  f.scaler.start();
  t.teardown(() => f.scaler.stop());
  await run(f, SWEEP - INTERVAL);
  t.equal(f.steps.filter((step) => step === 'sweep').length, 0, 'not at start');
  await run(f, INTERVAL);
  t.equal(f.steps.filter((step) => step === 'sweep').length, 1);
  await run(f, SWEEP);
  t.equal(f.steps.filter((step) => step === 'sweep').length, 2);
  await f.scaler.stop();
  await run(f, 2 * SWEEP);
  t.equal(f.steps.filter((step) => step === 'sweep').length, 2, 'no sweep once stopped');
});

t.test('the sweep runs only on the lease holder, and never during its own scale-in (the node still reads its terminating record)', async (t) => {
  const clock = new FakeClock(1_000_000);
  const nodes: ClusterNode[] = [
    { id: 'a', status: 'running', createdAt: 1 },
    { id: 'b', status: 'running', createdAt: 2 },
  ];
  let release!: () => void;
  const holder = fleet({ nodes, clock, cluster: 'shared-sweep', actions: { terminate: (id) => new Promise((resolve) => (release = resolve, void holder.steps.push(`terminate ${id}`))) } });
  const other = fleet({ nodes, clock, serverId: 'b', cluster: 'shared-sweep' });
  holder.scaler.start();
  other.scaler.start();
  t.teardown(() => Promise.all([holder.scaler.stop(), other.scaler.stop()]));
  await run(holder, SWEEP);
  t.equal(holder.steps.filter((step) => step === 'sweep').length, 1, 'the holder sweeps');
  t.equal(other.steps.filter((step) => step === 'sweep').length, 0, 'the other server does not');
  holder.load.cpu = 5;
  holder.load.memory = 5;
  await clock.advanceAsync(INTERVAL);
  t.ok(holder.steps.includes('terminate b'), 'a scale-in is at its provider request');
  await clock.advanceAsync(SWEEP);
  t.equal(holder.steps.filter((step) => step === 'sweep').length, 1, 'no sweep while it runs');
  release();
  await holder.scaler.settled();
  await run(holder, SWEEP);
  t.equal(holder.steps.filter((step) => step === 'sweep').length, 2, 'the next one after it');
});

t.test('the autoscaler methods act on the server: platform keys only', async (t) => {
  for (const method of ['autoscaler.status', 'autoscaler.pause', 'autoscaler.resume', 'autoscaler.signals']) {
    t.match(tenantViolation({ method }), /only the platform organization may call it/, method);
  }
});
