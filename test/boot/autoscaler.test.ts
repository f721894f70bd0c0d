import { EventEmitter } from 'node:events';
import path from 'node:path';
import t, { type Test } from 'tap';
import type { Autoscaler } from '../../src/autoscaler/service.js';
import { openAutoscaler, type AutoscalerBootDeps } from '../../src/boot/autoscaler.js';
import { loadConfig } from '../../src/config/load.js';
import { EmbeddedStore } from '../../src/db/embedded/store.js';
import { ensureStandardIndexes } from '../../src/db/open.js';
import type { RequestResult } from '../../src/ipc/handlers.js';
import { createLogger } from '../../src/logging/logger.js';
import { providerPort, type ProviderPortOptions } from '../../src/manager/provider-port.js';
import { tempDir } from '../helpers/server-process.js';

const CLUSTER = 'c1';
const PLATFORM = 'platform-org';
const TENANT = 'tenant-org';
// Thresholds this test process never crosses by its own CPU (sampled over a few milliseconds, it may read 100 %).
const POLICY = { minClusterSize: 1, maxClusterSize: 3, windowMs: 60_000, cooldownMs: 1_000, cpu: { scaleOutAbove: 100, scaleInBelow: 99 }, memory: { scaleOutAbove: 100, scaleInBelow: 99 } };
const long = new Date(Date.now() - 3_600_000).toISOString();

interface Harness {
  scaler: Autoscaler;
  db: EmbeddedStore;
  events: EventEmitter;
  envelopes: Array<Record<string, unknown>>;
  sent: Array<Record<string, unknown>>;
  lines: Array<Record<string, unknown> & { msg: string }>;
  /** How each method is answered (default: every targeted server answers ok). */
  answers: Map<string, (envelope: Record<string, unknown>) => RequestResult>;
}

/**
 * The autoscaler as the primary of server `a` builds it, over a real store: the router and the parent are
 * stand-ins that record what reaches them. Ticks are driven by the test.
 */
interface HarnessOptions {
  /** Unmanaged: the provider path of this server, answered by `api` (the built-in providers stand behind it). */
  api?: (envelope: Record<string, unknown>) => { status: number; data: unknown };
  config?: Record<string, unknown>;
}

async function harness(t: Test, records: Array<Record<string, unknown>>, policy: Record<string, unknown> | null = POLICY, options: HarnessOptions = {}): Promise<Harness> {
  const db = await EmbeddedStore.open(path.join(tempDir('fleetplane-autoscaler-boot-'), 'store.db'));
  await ensureStandardIndexes(db);
  t.teardown(() => db.close());
  for (const record of records) await db.collection('servers').insertOne({ cluster_id: CLUSTER, ...record });
  if (policy !== null) await db.forOrganization(PLATFORM).collection('clusters').insertOne({ _id: CLUSTER, name: CLUSTER, autoscaler: policy, initialDeployment: { cloud: 'local', workers: 1 } });
  // No removal notice unless a test sets one (the readiness grace): these scale-ins are about their steps.
  const config = loadConfig({ env: {}, object: { server: { cluster: CLUSTER, organization: TENANT }, db: { path: db.file }, autoscaler: { enabled: true }, lifecycle: { readinessGraceMs: 0 }, ...options.config } }).config;
  const lines: Harness['lines'] = [];
  const log = createLogger({ level: 'info', destination: { write: (line: string) => void lines.push(JSON.parse(line) as Harness['lines'][number]) } });
  const events = new EventEmitter();
  const envelopes: Array<Record<string, unknown>> = [];
  const sent: Array<Record<string, unknown>> = [];
  const answers: Harness['answers'] = new Map();
  const request = async (envelope: unknown): Promise<RequestResult> => {
    const given = envelope as Record<string, unknown>;
    envelopes.push(given);
    const answer = answers.get(String(given.method));
    if (answer) return answer(given);
    const servers = ([] as unknown[]).concat(given.server).map(String);
    return { id: 'x', replies: servers.map((server) => ({ server, worker: 0, ok: true, result: null })), missing: [] };
  };
  const metric = { inc: () => undefined, set: () => undefined };
  const deps = {
    config,
    serverId: 'a',
    log,
    db,
    platformOrganization: async () => PLATFORM,
    manager: { managed: !options.api, send: async (envelope: Record<string, unknown>) => void sent.push(envelope) },
    provider: providerPort({
      api: async (envelope: Record<string, unknown>) => {
        sent.push(envelope);
        return options.api ? options.api(envelope) : { status: 500, data: null };
      },
      workflows: { resolve: async () => null, run: async () => undefined },
      createWorkflow: config.manager.createWorkflow,
      terminateWorkflow: config.manager.terminateWorkflow,
    } as unknown as ProviderPortOptions),
    request,
    handle: () => undefined,
    events,
    metrics: { autoscalerActions: metric, clusterSizeCurrent: metric, clusterSizeDesired: metric },
  } as unknown as AutoscalerBootDeps;
  return { scaler: openAutoscaler(deps), db, events, envelopes, sent, lines, answers };
}

/** Two ticks: the sampler's first call only sets its starting point. */
async function evaluate(h: Harness, ticks = 2): Promise<void> {
  for (let tick = 0; tick < ticks; tick++) {
    await h.scaler.tick();
    await h.scaler.settled();
  }
}

const servers = (h: Harness) => h.db.collection<{ _id: string; master?: { status?: string } }>('servers');
const samplesOf = (cpu: number) => [{ at: Date.now(), cpu, memory: 1 }];
const signalsAnswer = (load: Record<string, unknown>) => (envelope: Record<string, unknown>): RequestResult => {
  const servers = ([] as unknown[]).concat(envelope.server).map(String);
  return { id: 'x', replies: servers.map((server) => ({ server, worker: 0, ok: true, result: load[server] })), missing: [] };
};
/** Burns CPU between samples, so this process reads well over a tiny threshold. */
const busy = (ms: number) => {
  const until = Date.now() + ms;
  while (Date.now() < until);
};

t.test("the cluster's own organization confirmed inactive lets the last server remove itself; active again, or another organization's, does not", async (t) => {
  const h = await harness(t, [{ _id: 'a', master: { status: 'running', startedAt: long, servingSince: long } }], { ...POLICY, minClusterSize: 0 });
  h.events.emit('organization.inactive', { organization_id: 'another-org' });
  await evaluate(h);
  t.match((await h.scaler.status()).lastDecision, { action: 'none' }, "another organization's inactivity is not the cluster's");
  h.events.emit('organization.inactive', { organization_id: TENANT });
  h.events.emit('organization.active', { organization_id: TENANT });
  await evaluate(h, 1);
  t.match((await h.scaler.status()).lastDecision, { action: 'none' }, 'active again before the decision: it stays');
  h.events.emit('organization.inactive', { organization_id: TENANT });
  await evaluate(h, 1);
  t.match((await h.scaler.status()).lastAction, { action: 'scale-in', reason: 'organization-inactive', serverId: 'a', outcome: 'done' });
  t.same(
    h.envelopes.filter((envelope) => envelope.method !== 'autoscaler.signals').map((envelope) => `${envelope.method} ${String(envelope.server)}`),
    ['drain a', 'autoscaler.remove a'],
    'it drained itself, and was stopped gracefully (autoscaler.remove) after the provider request',
  );
  t.same(h.sent, [{ method: 'terminateServer', cluster: CLUSTER, server_id: 'a' }], 'the parent was asked to terminate it');
  t.equal((await servers(h).findOne({ _id: 'a' }))?.master?.status, 'terminating', 'terminating committed');
  t.ok(h.lines.some((line) => line.msg === "autoscaler: the cluster's organization is inactive"), 'logged');
});

t.test('a node that disappears during its drain: the action ends cancelled and logged, its record untouched, nothing terminated', async (t) => {
  const h = await harness(t, [
    { _id: 'a', master: { status: 'running', servingSince: long } },
    { _id: 'b', master: { status: 'running', servingSince: long } },
  ], { ...POLICY, maxClusterSize: 1 });
  h.answers.set('autoscaler.signals', signalsAnswer({ b: samplesOf(1) }));
  // The drain gets no answer: the server is gone from the mesh.
  h.answers.set('drain', (envelope) => ({ id: 'x', replies: [], missing: [{ server: String(envelope.server) }] }));
  await evaluate(h);
  t.match((await h.scaler.status()).lastAction, { action: 'scale-in', reason: 'above-max', serverId: 'b', outcome: 'cancelled' });
  t.ok(h.lines.some((line) => line.msg === 'autoscaler scale-in cancelled: server b disappeared during the drain'), 'logged');
  t.equal((await servers(h).findOne({ _id: 'b' }))?.master?.status, 'running', 'the record is not touched');
  t.same(h.sent, [], 'no provider request');
});

t.test('signals missing or malformed from a peer: no scale-out from partial data; with them, one', async (t) => {
  const h = await harness(t, [
    { _id: 'a', master: { status: 'running', servingSince: long } },
    { _id: 'b', master: { status: 'running', servingSince: long } },
  ], { ...POLICY, cpu: { scaleOutAbove: 0.001, scaleInBelow: 0 } });
  h.answers.set('autoscaler.signals', signalsAnswer({ b: [{ at: 'yesterday', cpu: 'high' }] }));
  await h.scaler.tick();
  busy(60);
  await evaluate(h, 1);
  t.match((await h.scaler.status()).lastDecision, { action: 'none', reason: 'signals missing from a server' });
  h.answers.set('autoscaler.signals', signalsAnswer({ b: samplesOf(50) }));
  busy(60);
  await evaluate(h, 1);
  t.match((await h.scaler.status()).lastAction, { action: 'scale-out', reason: 'cpu', outcome: 'done' });
  t.same(h.sent, [{ method: 'createServer', cluster: CLUSTER }], 'the parent creates the server');
});

t.test('a running record whose workers have not served yet counts as starting: it counts toward the size, and no other action meanwhile', async (t) => {
  const h = await harness(t, [
    { _id: 'a', master: { status: 'running', servingSince: long } },
    { _id: 'b', master: { status: 'running', servingSince: null } },
  ], { ...POLICY, minClusterSize: 2 });
  await evaluate(h);
  t.match((await h.scaler.status()).lastDecision, { action: 'none', reason: 'a new server is not confirmed yet', current: 2 });
  t.match(await h.scaler.status(), { deciding: true }, 'the serving server decides');
  await servers(h).updateOne({ _id: 'b' }, { $set: { 'master.servingSince': new Date().toISOString() } });
  await evaluate(h, 1);
  t.match((await h.scaler.status()).lastDecision, { action: 'none', reason: 'cooldown', current: 2 }, 'confirmed: the cooldown runs from when it began to serve');
});

t.test("pause and resume write the cluster document's policy; a cluster without one is refused and unchanged", async (t) => {
  const h = await harness(t, [{ _id: 'a', master: { status: 'running', servingSince: long } }], null);
  await t.rejects(h.scaler.pause(), { code: 'bad_request', message: /cluster c1 has no autoscaler section/ });
  await h.db.forOrganization(PLATFORM).collection('clusters').insertOne({ _id: CLUSTER, name: CLUSTER });
  await t.rejects(h.scaler.pause(), { code: 'bad_request' }, 'a document without an autoscaler section: nothing to pause');
  t.same(await h.db.forOrganization(PLATFORM).collection('clusters').findOne({ _id: CLUSTER }), { _id: CLUSTER, name: CLUSTER, organization_id: PLATFORM }, 'unchanged');
  await h.db.forOrganization(PLATFORM).collection('clusters').updateOne({ _id: CLUSTER }, { $set: { autoscaler: POLICY } });
  t.match(await h.scaler.pause(), { paused: true });
  t.match((await h.db.forOrganization(PLATFORM).collection('clusters').findOne({ _id: CLUSTER }))?.autoscaler, { ...POLICY, paused: true });
  t.match(await h.scaler.resume(), { paused: false });
});

t.test("an unmanaged cluster's scale-out asks its provider for a server that joins it: id, cluster, organization, deployment, mesh secret, store, autoscaler", async (t) => {
  const h = await harness(t, [{ _id: 'a', master: { status: 'running', servingSince: long } }], { ...POLICY, minClusterSize: 2 }, {
    api: () => ({ status: 200, data: { instanceId: 'fp-local-0123456789abcdef' } }),
    config: { mesh: { secret: 'the-cluster-mesh-secret-0123456789' }, autoscaler: { enabled: true, intervalMs: 250, powerOffOnRemoval: true }, lifecycle: { hostControl: true } },
  });
  await evaluate(h);
  t.match((await h.scaler.status()).lastAction, { action: 'scale-out', reason: 'below-min', outcome: 'done' });
  t.equal(h.sent.length, 1, 'one provider request');
  const created = h.sent[0] as { api: string; endpoint: string; organization_id: string; data: Record<string, any> };
  t.match(created, { api: 'local', endpoint: 'create', method: 'post', organization_id: PLATFORM });
  const serverId = created.data.server_id as string;
  t.match(created.data, {
    cluster_id: CLUSTER,
    organization_id: PLATFORM,
    deployment: { cloud: 'local', workers: 1 },
    startup: {
      server: { id: serverId, cluster: CLUSTER, organization: PLATFORM },
      mesh: { secret: 'the-cluster-mesh-secret-0123456789' },
      db: { path: h.db.file },
      autoscaler: { enabled: true, intervalMs: 250 },
    },
  });
  t.notOk('powerOffOnRemoval' in created.data.startup.autoscaler, "powering a host off is each host's own choice, never handed on");
  t.notOk('manager' in created.data.startup, 'no parent connection: no parent manages the cluster');
  t.match(await servers(h).findOne({ _id: serverId }), { cluster_id: CLUSTER, organization_id: PLATFORM, master: { status: 'starting' }, infrastructure: { cloud: 'local', instanceId: 'fp-local-0123456789abcdef' } }, 'its record counts toward the size until it confirms');
});

t.test('a scale-out the provider refuses: one warning with its reason, no record left, and the next attempt backs off', async (t) => {
  const h = await harness(t, [{ _id: 'a', master: { status: 'running', servingSince: long } }], { ...POLICY, minClusterSize: 2 }, {
    api: () => ({ status: 400, data: { error: 'data.startup.server.organization: is required' } }),
  });
  await evaluate(h);
  t.match((await h.scaler.status()).lastAction, { action: 'scale-out', outcome: 'failed' });
  const warnings = h.lines.filter((line) => line.level === 40);
  t.same(warnings.map((line) => line.msg), ['autoscaler scale-out failed: provider "local" answered 400 to create: data.startup.server.organization: is required']);
  t.same((await servers(h).find({}, { limit: 0 })).map((record) => record._id), ['a'], 'the refused server left no record behind');
  // Past the cooldown (1 s), a second attempt; after it, two cooldowns before the third.
  const before = h.sent.length;
  await new Promise((resolve) => setTimeout(resolve, 1_100));
  await evaluate(h, 1);
  t.equal(h.sent.length, before + 1, 'tried again after one cooldown');
  await new Promise((resolve) => setTimeout(resolve, 1_100));
  await evaluate(h, 1);
  t.equal(h.sent.length, before + 1, 'not again one cooldown later: it backs off');
  t.match((await h.scaler.status()).lastDecision, { action: 'none', reason: 'backing off after 2 failed scale-out attempts' });
});

t.test("the removal notice is this server's readiness grace: the provider is asked that long after the node's record says terminating, not before", async (t) => {
  const NOTICE_MS = 400;
  let askedAt: number | undefined;
  const h = await harness(t, [
    { _id: 'a', master: { status: 'running', servingSince: long } },
    { _id: 'b', master: { status: 'running', servingSince: long }, infrastructure: { cloud: 'other-cloud', instanceId: 'i-42' } },
  ], { ...POLICY, maxClusterSize: 1 }, {
    api: () => ((askedAt = Date.now()), { status: 200, data: { accepted: true } }),
    config: { lifecycle: { readinessGraceMs: NOTICE_MS } },
  });
  h.answers.set('autoscaler.signals', signalsAnswer({ b: samplesOf(1) }));
  // The autoscaler's timers never hold a process (a server has its sockets for that); this test has none.
  const holder = setInterval(() => undefined, 1_000);
  t.teardown(() => clearInterval(holder));
  await evaluate(h);
  t.match((await h.scaler.status()).lastAction, { action: 'scale-in', serverId: 'b', outcome: 'done' });
  const marked = h.lines.find((line) => line.msg === 'autoscaler marked b terminating');
  t.ok(marked && askedAt !== undefined, 'terminating committed, then the provider asked');
  // Timers may fire a millisecond early by the wall clock; without the notice the gap is about one millisecond.
  const gap = askedAt! - Date.parse(String(marked!.time));
  t.ok(gap >= NOTICE_MS - 5, `the provider was asked ${gap} ms after terminating was committed (notice ${NOTICE_MS} ms)`);
});

t.test("an unmanaged cluster's scale-in names the instance its provider made, then stops the node with autoscaler.remove", async (t) => {
  const h = await harness(t, [
    { _id: 'a', master: { status: 'running', servingSince: long } },
    { _id: 'b', master: { status: 'running', servingSince: long }, infrastructure: { cloud: 'other-cloud', instanceId: 'i-42' } },
  ], { ...POLICY, maxClusterSize: 1 }, { api: () => ({ status: 200, data: { accepted: true } }) });
  h.answers.set('autoscaler.signals', signalsAnswer({ b: samplesOf(1) }));
  await evaluate(h);
  t.match((await h.scaler.status()).lastAction, { action: 'scale-in', serverId: 'b', outcome: 'done' });
  t.same(h.sent, [{ organization_id: PLATFORM, api: 'other-cloud', endpoint: 'terminate', method: 'post', data: { server_id: 'b', cluster_id: CLUSTER, instanceId: 'i-42' } }], 'the cloud and instance of its record');
  t.same(
    h.envelopes.filter((envelope) => envelope.method !== 'autoscaler.signals').map((envelope) => `${envelope.method} ${String(envelope.server)} ${String(envelope.confirm ?? '')}`.trim()),
    ['drain b', 'autoscaler.remove b b'],
    'drained, then removed with its own id confirmed',
  );
  t.notOk(h.lines.some((line) => (line.level as number) >= 40), 'nothing logged as failed');
});
