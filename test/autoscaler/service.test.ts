import t from 'tap';
import { Autoscaler, type AutoscalerDeps, type ScaleActions } from '../../src/autoscaler/service.js';
import type { ClusterNode, Sample } from '../../src/autoscaler/decide.js';
import { tenantViolation } from '../../src/auth/authority.js';
import { FakeClock, settle } from '../helpers/fake-clock.js';

const INTERVAL = 1_000;
const COOLDOWN = 60_000;
const SWEEP = 600_000;
const POLICY = { minClusterSize: 1, maxClusterSize: 3, cooldownMs: COOLDOWN, windowMs: 5_000 };

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
}

/** A cluster as the deciding server `a` sees it: fake inventory, peers, provider and clock. */
function fleet(options: { nodes?: ClusterNode[]; serverId?: string; actions?: Partial<ScaleActions>; policy?: Record<string, unknown> } = {}): Fleet {
  const clock = new FakeClock(1_000_000);
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
  const peerLoad = new Map<string, { cpu: number; memory: number }>();
  const actions: ScaleActions = {
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
    sample: () => ({ at: clock.now(), ...load }),
    inventory: {
      nodes: async () => nodes.map((node) => ({ ...node })),
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
    log: { info: (_fields, message) => logs.push(message), warn: (_fields, message) => logs.push(message) },
    metrics: { action: (action, reason) => metrics.push(`${action} ${reason}`), size: (current, desired) => metrics.push(`size ${current}->${desired}`) },
  };
  return { clock, scaler: new Autoscaler(deps), nodes, steps, logs, metrics, load, peerLoad, actions, policy, organization };
}

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

t.test('only the lowest running id decides; the others only sample', async (t) => {
  const f = fleet({ serverId: 'b' });
  f.scaler.start();
  t.teardown(() => f.scaler.stop());
  f.load.cpu = 95;
  await run(f, 5 * INTERVAL);
  t.same(f.steps, [], 'no gathering, no action');
  t.equal((await f.scaler.status()).deciding, false);
  t.equal(f.scaler.signals().length, 5, 'its samples are there for the deciding server to gather');
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

t.test('the autoscaler methods act on the server: platform keys only', async (t) => {
  for (const method of ['autoscaler.status', 'autoscaler.pause', 'autoscaler.resume', 'autoscaler.signals']) {
    t.match(tenantViolation({ method }), /only the platform organization may call it/, method);
  }
});
