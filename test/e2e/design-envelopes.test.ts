import path from 'node:path';
import t from 'tap';
import WebSocket from 'ws';
import { createKey } from '../../src/auth/keys.js';
import type { Permissions } from '../../src/schema/permissions.js';
import { EmbeddedStore } from '../../src/db/embedded/store.js';
import { ServerProcess, fleetplane, request, type Reply } from '../helpers/server-process.js';
import { dataDirWithTenants } from '../helpers/tenants.js';
import { until } from './manager-fixture.js';

// Real processes on a shared machine: generous budgets, no fixed sleeps.
t.setTimeout(600_000);

interface TargetReply { server: string; worker: number; ok: boolean; result?: any; error?: { code: string; message: string } }
interface Result { id: string; replies: TargetReply[]; missing: unknown[] }

/** The workers that answer fresh connections, over a few requests. */
async function servingWorkers(port: number, host = 'localhost'): Promise<number[]> {
  const seen = new Set<number>();
  for (let index = 0; index < 6; index++) {
    const reply = await request(port, '/whoami', { host });
    if (reply.status === 200) seen.add(reply.json().worker);
  }
  return [...seen].sort();
}

/**
 * A server with two workers, the platform organization `acme` (localhost) and the tenant `globex`, and two
 * platform keys whose cordon and shed rights are restricted by the design's field names.
 */
async function world() {
  const { dataDir, tenants } = await dataDirWithTenants([
    { name: 'acme', hosts: ['localhost', '127.0.0.1'] },
    { name: 'globex', hosts: ['globex.test'] },
  ]);
  const [acme, globex] = [tenants[0]!, tenants[1]!];
  const store = await EmbeddedStore.open(path.join(dataDir, 'fleetplane.db'));
  const restricted = async (name: string, permissions: Permissions) => (await createKey(store, { organizationId: acme.organization_id, name, permissions })).key;
  const keys = {
    uncordonOnly: await restricted('uncordon only', { cordon: { value: [false] } }),
    shedGlobexOnly: await restricted('shed globex only', { shed: { organizations: [globex.organization_id] } }),
    statusOnly: await restricted('status only', { status: true }),
    globexUser: (await createKey(store, { organizationId: globex.organization_id, name: 'globex user', permissions: { cordon: true, autoscaler: true } })).key,
  };
  await store.close();
  const server = await ServerProcess.start({ workers: 2, dataDir, fallback: { redirect: 'http://lb.example.test' } });
  await server.readyWorkers(2, 0, 90_000);
  const control = (body: unknown, key?: string, host = 'localhost') => request(server.port, '/control', { body, key, host });
  return { server, dataDir, acme, globex, keys, control };
}

function socketOf(port: number, key: string): Promise<{ socket: WebSocket; answer(frame: Record<string, unknown>): Promise<any> }> {
  return new Promise((resolve, reject) => {
    const socket = new WebSocket(`ws://127.0.0.1:${port}/ws`, { headers: { host: 'localhost', authorization: `Bearer ${key}` }, perMessageDeflate: false });
    const frames: any[] = [];
    socket.on('message', (data) => frames.push(JSON.parse(String(data))));
    let next = 1;
    const answer = async (frame: Record<string, unknown>) => {
      const requestId = next++;
      socket.send(JSON.stringify({ ...frame, requestId }));
      return until(`frame ${requestId}`, async () => frames.find((candidate) => candidate.id === requestId));
    };
    socket.once('open', () => resolve({ socket, answer }));
    socket.once('error', reject);
  });
}

const refusedWith = (reply: Reply, status: number) => reply.status === status && typeof reply.json().error?.code === 'string';

t.test("the design's cordon, drain and shed envelopes, over /control, the WebSocket and server.send / request", async (t) => {
  const w = await world();
  t.teardown(() => w.server.stop());
  const { acme, globex, control } = w;

  await t.test('/control: cordon with value', async (t) => {
    const cordon = await control({ method: 'cordon', worker: 1, value: true }, acme.adminKey);
    t.equal(cordon.status, 200, cordon.body);
    t.match(cordon.json().replies, [{ worker: 1, ok: true }]);
    t.same(await servingWorkers(w.server.port), [2], 'worker 1 takes no new connections');
  });

  await t.test('/control: value and data that disagree are a 400 naming both, and nothing changes', async (t) => {
    const conflict = await control({ method: 'cordon', worker: 2, value: true, data: false }, acme.adminKey);
    t.equal(conflict.status, 400);
    t.match(conflict.json(), { error: { code: 'bad_request', message: /^value and data disagree \(value: true, data: false\)/ } });
    const agreeing = await control({ method: 'cordon', worker: 2, value: false, data: false }, acme.adminKey);
    t.equal(agreeing.status, 200, 'both given and equal is fine');
    t.same(await servingWorkers(w.server.port), [2], 'worker 2 still serves: the refused envelope cordoned nothing');
    const elsewhere = await control({ method: 'restart', master: true, value: true }, acme.adminKey);
    t.equal(elsewhere.status, 400);
    t.match(elsewhere.json(), { error: { code: 'invalid_envelope', message: /^value: only cordon and drain take value/ } });
  });

  await t.test('the WebSocket: cordon and drain with value', async (t) => {
    const { socket, answer } = await socketOf(w.server.port, acme.adminKey);
    t.teardown(() => socket.terminate());
    t.match(await answer({ method: 'cordon', worker: 1, value: false }), { ok: true, result: { replies: [{ worker: 1, ok: true }] } });
    t.same(await servingWorkers(w.server.port), [1, 2], 'worker 1 serves again');
    const conflict = await answer({ method: 'drain', worker: 1, value: true, data: false });
    t.match(conflict, { ok: false, error: { code: 'bad_request', message: /^value and data disagree/ } });
    t.same(await servingWorkers(w.server.port), [1, 2], 'nothing drained');
  });

  await t.test('/control shed with organizations, ended by server.send with organizations: false', async (t) => {
    const shed = await control({ method: 'shed', master: true, organizations: [globex.organization_id] }, acme.adminKey);
    t.equal(shed.status, 200, shed.body);
    t.equal((await request(w.server.port, '/whoami', { host: 'globex.test' })).status, 307, 'globex gets the fallback');
    t.equal((await request(w.server.port, '/whoami')).status, 200, 'acme is served');
    await w.server.command('send', { envelope: { method: 'shed', master: true, organizations: false } });
    await until('globex served again', async () => ((await request(w.server.port, '/whoami', { host: 'globex.test' })).status === 200 ? true : undefined));
    t.pass('server.send took the design shape');
  });

  await t.test("server.request from a worker, and server.state.cordon(value)", async (t) => {
    const fromWorker = await request(w.server.port, '/fixture/request', { body: { envelope: { method: 'cordon', worker: 2, value: true } } });
    t.equal(fromWorker.status, 200, fromWorker.body);
    t.match(fromWorker.json().result.replies, [{ worker: 2, ok: true }]);
    t.same(await servingWorkers(w.server.port), [1]);
    const conflict = await request(w.server.port, '/fixture/request', { body: { envelope: { method: 'cordon', worker: 2, value: false, data: true } } });
    t.equal(conflict.status, 400);
    t.match(conflict.json(), { error: { code: 'bad_request', message: /^value and data disagree/ } });
    await w.server.command('cordon', { value: false, worker: 2 });
    t.same(await servingWorkers(w.server.port), [1, 2], 'server.state.cordon(false) keeps working');
  });

  await t.test('a restriction on value or organizations holds whichever spelling the caller used', async (t) => {
    for (const body of [{ method: 'cordon', worker: 1, data: true }, { method: 'cordon', worker: 1, value: true }, { method: 'cordon', worker: 1 }]) {
      t.ok(refusedWith(await control(body, w.keys.uncordonOnly), 403), `uncordon-only key: ${JSON.stringify(body)} is refused`);
    }
    t.equal((await control({ method: 'cordon', worker: 1, data: false }, w.keys.uncordonOnly)).status, 200, 'the data spelling of what it may do');
    t.ok(refusedWith(await control({ method: 'shed', master: true, data: [acme.organization_id] }, w.keys.shedGlobexOnly), 403), 'another organization than the restriction names');
    t.ok(refusedWith(await control({ method: 'shed', master: true, organizations: false }, w.keys.shedGlobexOnly), 403), 'false is not in its list');
    t.equal((await control({ method: 'shed', master: true, data: [globex.organization_id] }, w.keys.shedGlobexOnly)).status, 200, 'its own organization, spelled as data');
    t.equal((await control({ method: 'shed', master: true, organizations: false }, acme.adminKey)).status, 200);
    t.same(await servingWorkers(w.server.port), [1, 2], 'nothing the refusals asked for happened');
  });

  await t.test("another organization's key (admin and not), a key without the right and no key are refused", async (t) => {
    const body = { method: 'cordon', worker: 1, value: true };
    const cases: Array<[string, string | undefined, string]> = [
      ['the tenant admin key on its own host', globex.adminKey, 'globex.test'],
      ["the tenant admin key on the platform's host", globex.adminKey, 'localhost'],
      ['a tenant key holding cordon', w.keys.globexUser, 'globex.test'],
      ['a platform key without cordon', w.keys.statusOnly, 'localhost'],
      ['no key', undefined, 'localhost'],
    ];
    for (const [name, key, host] of cases) t.ok(refusedWith(await control(body, key, host), 403), name);
    t.same(await servingWorkers(w.server.port), [1, 2], 'no worker was cordoned');
  });

  await t.test('a method whose subsystem is off answers disabled, naming the setting, over /control and ctl', async (t) => {
    const scale = await control({ method: 'autoscaler.status', master: true }, acme.adminKey);
    t.equal(scale.status, 200, scale.body);
    t.match(scale.json().replies, [{ worker: 0, ok: false, error: { code: 'disabled', message: /autoscaler\.enabled/ } }]);
    for (const [name, key, host] of [
      ['the tenant admin key', globex.adminKey, 'globex.test'],
      ['a tenant key holding autoscaler', w.keys.globexUser, 'globex.test'],
      ['a platform key without the right', w.keys.statusOnly, 'localhost'],
      ['no key', undefined, 'localhost'],
    ] as const) {
      t.ok(refusedWith(await control({ method: 'autoscaler.status', master: true }, key, host), 403), `${name}: 403, and the setting is not named to it`);
    }
    for (const command of ['status', 'pause', 'resume']) {
      const ctl = await fleetplane(['ctl', 'scale', command, '--data-dir', w.dataDir]);
      t.equal(ctl.status, 1, `ctl scale ${command}: exit 1`);
      const lines = ctl.stdout.trim().split('\n');
      t.equal(lines.length, 1, `ctl scale ${command}: one line`);
      t.match(lines[0], /error disabled: autoscaler\.\w+: the autoscaler is off on this server \(autoscaler\.enabled is false\)/);
    }
    const toWorkers = await fleetplane(['ctl', 'autoscaler.status', '--broadcast', '--json', '--data-dir', w.dataDir]);
    t.equal(toWorkers.status, 1);
    const replies = JSON.parse(toWorkers.stdout).replies as TargetReply[];
    t.equal(replies.length, 2);
    t.ok(replies.every((reply) => reply.error?.code === 'wrong_target' && /master: true/.test(reply.error.message)), 'workers say the primary answers it');
  });
});

t.test('the server object is an EventEmitter in the primary and in each worker, and announces cordon, drain and shed where they apply', async (t) => {
  const { dataDir, tenants } = await dataDirWithTenants([
    { name: 'acme', hosts: ['localhost'] },
    { name: 'globex', hosts: ['globex.test'] },
  ]);
  const [acme, globex] = [tenants[0]!, tenants[1]!];
  const server = await ServerProcess.start({ workers: 2, dataDir });
  t.teardown(() => server.stop());
  await server.readyWorkers(2, 0, 90_000);
  const seen = async () => {
    const result = await server.command<Result>('request', { envelope: { method: 'fixture.events', master: true, broadcast: true } });
    return new Map(result.replies.map((reply) => [reply.worker, reply.result as { emitter: boolean; events: Array<Record<string, unknown>> }]));
  };
  const eventsOf = async (worker: number, event: string) => (await seen()).get(worker)!.events.filter((entry) => entry.event === event);

  const processes = await seen();
  t.same([...processes.keys()].sort(), [0, 1, 2]);
  for (const [worker, info] of processes) t.equal(info.emitter, true, `${worker === 0 ? 'the primary' : `worker ${worker}`}: server instanceof EventEmitter`);

  // A listener that throws in the primary: the cordon still applies, the primary lives, the error is logged.
  await server.command('throwingListener', { event: 'cordon' });
  const cordon = await request(server.port, '/control', { body: { method: 'cordon', worker: 1, value: true }, key: acme.adminKey, host: 'localhost' });
  t.equal(cordon.status, 200, cordon.body);
  t.same(await eventsOf(0, 'cordon'), [{ event: 'cordon', value: true, worker: 1 }], 'the primary announced it, once, naming worker 1');
  t.same(await eventsOf(1, 'cordon'), [{ event: 'cordon', value: true, worker: 1 }], 'worker 1 announced it');
  t.same(await eventsOf(2, 'cordon'), [], 'worker 2 was not concerned');
  await server.waitFor((event) => event.msg === 'event listener failed' && event.event === 'cordon', 10_000);
  t.equal((await server.command<{ status: string }>('health')).status !== undefined, true, 'the primary still answers after the listener threw');

  await server.command('cordon', { value: false, worker: 1 });
  await server.command('drain', { value: true, worker: 1 });
  await server.command('drain', { value: false, worker: 1 });
  t.same(await eventsOf(0, 'drain'), [{ event: 'drain', value: true, worker: 1 }, { event: 'drain', value: false, worker: 1 }], 'the primary: drain, then its end');
  t.same(await eventsOf(1, 'drain'), [{ event: 'drain', value: true, worker: 1 }, { event: 'drain', value: false, worker: 1 }], 'worker 1 alike');
  t.same(await eventsOf(2, 'drain'), [], 'worker 2 was not concerned');

  await server.command('shed', { organizations: [globex.organization_id] });
  await server.command('shed', { organizations: false });
  for (const worker of [0, 1, 2]) {
    t.same(await eventsOf(worker, 'shed'), [{ event: 'shed', organizations: [globex.organization_id] }, { event: 'shed', organizations: false }], `process ${worker}: shed, then its end`);
  }
  t.equal(server.count((event) => event.event === 'worker:crash'), 0, { exits: server.events.filter((event) => event.event === 'worker:crash' || event.event === 'worker:exit'), stderr: server.stderr.slice(-10) });
});

t.test('single-process mode: one process, each change announced once', async (t) => {
  const server = await ServerProcess.start({ workers: 0 });
  t.teardown(() => server.stop());
  await server.command('cordon', { value: true });
  await server.command('cordon', { value: false });
  await server.command('shed', { organizations: ['org-x'] });
  const result = await server.command<Result>('request', { envelope: { method: 'fixture.events', master: true } });
  t.equal(result.replies.length, 1);
  t.same(result.replies[0]!.result, {
    worker: 0,
    primary: true,
    emitter: true,
    events: [
      { event: 'cordon', value: true, worker: 0 },
      { event: 'cordon', value: false, worker: 0 },
      { event: 'shed', organizations: ['org-x'] },
    ],
  });
});
