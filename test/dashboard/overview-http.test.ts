import t from 'tap';
import path from 'node:path';
import WebSocket from 'ws';
import { createKey } from '../../src/auth/keys.js';
import { EmbeddedStore } from '../../src/db/embedded/store.js';
import { ServerProcess, request } from '../helpers/server-process.js';
import { dataDirWithTenants } from '../helpers/tenants.js';
import { callControlSocket, controlSocketPath } from '../../src/control/socket.js';

t.setTimeout(240_000);

async function post(port: number, body: unknown, options: { key?: string; host: string }): Promise<{ status: number; json: any }> {
  const reply = await request(port, '/control', { body, ...options, timeoutMs: 20_000 });
  return { status: reply.status, json: reply.json() };
}

function socket(port: number, host: string): Promise<{ ws: WebSocket; frames: any[] }> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(`ws://127.0.0.1:${port}/ws`, { headers: { host }, perMessageDeflate: false });
    const frames: any[] = [];
    ws.on('message', (data) => frames.push(JSON.parse(String(data))));
    ws.once('open', () => resolve({ ws, frames }));
    ws.once('error', reject);
  });
}

async function frame(frames: any[], predicate: (frame: any) => boolean, timeoutMs = 15_000): Promise<any> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const found = frames.find(predicate);
    if (found) return found;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  throw new Error(`no matching frame in ${JSON.stringify(frames)}`);
}

type Tenant = Awaited<ReturnType<typeof dataDirWithTenants>>['tenants'][number];
let platform: Tenant;
let globex: Tenant;
let platformNoRights: string;
let platformViewer: string;
let globexMember: string;
let server: ServerProcess;
let serverId: string;
let dataDir: string;

t.before(async () => {
  let tenants: Tenant[];
  ({ dataDir, tenants } = await dataDirWithTenants([
    { name: 'platform', hosts: ['localhost'] },
    { name: 'globex', hosts: ['globex.test'] },
  ]));
  [platform, globex] = tenants as [Tenant, Tenant];
  const store = await EmbeddedStore.open(path.join(dataDir, 'fleetplane.db'));
  platformNoRights = (await createKey(store, { organizationId: platform.organization_id, name: 'none', permissions: {} })).key;
  platformViewer = (await createKey(store, { organizationId: platform.organization_id, name: 'viewer', permissions: { overview: true } })).key;
  globexMember = (await createKey(store, { organizationId: globex.organization_id, name: 'member', permissions: { '*': true } })).key;
  await store.close();
  server = await ServerProcess.start({ workers: 2, dataDir, organizations: { graceMs: 300 } });
  await server.readyWorkers(2);
  serverId = String(server.events.find((event) => event.event === 'started')!.id);
});
t.teardown(() => server?.stop());

const METHODS = [
  { method: 'overview.server', master: true },
  { method: 'overview.cluster', master: true },
  { method: 'overview.events', master: true },
  { method: 'overview.worker', broadcast: true },
];

t.test('a platform key with the right reads the overview: server, cluster and events', async (t) => {
  for (const key of [platform.adminKey, platformViewer]) {
    const summary = await post(server.port, { method: 'overview.server', master: true, data: { historySince: 0 } }, { key, host: 'localhost' });
    t.equal(summary.status, 200);
    const result = summary.json.replies[0].result;
    t.match(result, { server: serverId, status: 'ready', ready: true, workers: { target: 2, active: 2 } });
    t.equal(result.processes.length, 2, 'both workers are listed');
    t.ok(result.processes.every((entry: any) => entry.status === 'ready' && entry.connections !== null), 'with their own figures');
    t.type(result.history, 'object', 'and their history when asked');
  }
  const cluster = await post(server.port, { method: 'overview.cluster', master: true }, { key: platform.adminKey, host: 'localhost' });
  t.match(cluster.json.replies[0].result, { servers: [{ server: serverId }], missing: [], failed: [] });
  const events = await post(server.port, { method: 'overview.events', master: true, data: { since: 0 } }, { key: platform.adminKey, host: 'localhost' });
  t.ok(events.json.replies[0].result.events.some((entry: any) => entry.kind === 'status' && /starting → ready/.test(entry.message)), 'the journal holds the workers becoming ready');
});

t.test('another organization, a key without the right, and no key are refused every overview method', async (t) => {
  const attempts = [
    { who: "another organization's admin key on the platform host", key: globex.adminKey, host: 'localhost', code: 'forbidden' },
    { who: "another organization's admin key on its own host", key: globex.adminKey, host: 'globex.test', code: 'platform_only' },
    { who: "another organization's non-admin key with every permission", key: globexMember, host: 'globex.test', code: 'platform_only' },
    { who: 'a platform key without the right', key: platformNoRights, host: 'localhost', code: 'permission_denied' },
    { who: 'no key', key: undefined, host: 'localhost', code: 'forbidden' },
  ];
  for (const attempt of attempts) {
    for (const envelope of METHODS) {
      const reply = await post(server.port, envelope, { key: attempt.key, host: attempt.host });
      t.equal(reply.status, 403, `${attempt.who}: ${envelope.method} is refused`);
      t.equal(reply.json.error.code, attempt.code, `${attempt.who}: ${envelope.method} answers ${attempt.code}`);
      t.notMatch(JSON.stringify(reply.json), /platform"|globex|srv|pid/, 'the refusal names nobody');
    }
  }
  // The tenant's own organization scope does not reach the overview either.
  const scoped = await post(server.port, { method: 'overview.server', organization_id: globex.organization_id }, { key: globex.adminKey, host: 'globex.test' });
  t.equal(scoped.status, 403);
});

t.test('bad arguments get a clear error naming the field, and change nothing', async (t) => {
  const bad = await post(server.port, { method: 'overview.server', master: true, data: { processes: 'yes' } }, { key: platform.adminKey, host: 'localhost' });
  t.match(bad.json.replies[0], { ok: false, error: { code: 'bad_request', message: /overview\.server: processes/ } });
  const since = await post(server.port, { method: 'overview.events', master: true, data: { since: -1 } }, { key: platform.adminKey, host: 'localhost' });
  t.match(since.json.replies[0], { ok: false, error: { code: 'bad_request', message: /overview\.events: since/ } });
  const extra = await post(server.port, { method: 'overview.cluster', master: true, data: { everything: true } }, { key: platform.adminKey, host: 'localhost' });
  t.match(extra.json.replies[0], { ok: false, error: { code: 'bad_request' } });
});

const INTERNAL = { code: 'forbidden', message: '"overview.emit" is internal: only the server\'s own processes send it, and no key may' };

t.test("overview.emit is internal: no key sends it, through /control, /ws or the control socket, and only the server's own events reach the dashboards", async (t) => {
  const dashboard = await socket(server.port, 'localhost');
  t.teardown(() => dashboard.ws.terminate());
  dashboard.ws.send(JSON.stringify({ requestId: 'sub', method: 'overview.subscribe', apikey: platform.adminKey }));
  t.match(await frame(dashboard.frames, (entry) => entry.id === 'sub'), { ok: true, result: { subscribed: true } });
  const fake = (who: string) => ({ server: serverId, seq: 99_999, at: Date.now(), kind: 'crash', worker: 1, message: `worker 1 (pid 1) crashed: exit code 1 (${who})` });

  for (const [who, key] of [['the platform admin', platform.adminKey], ['a viewer', platformViewer]] as const) {
    for (const target of [{ broadcast: true }, { worker: [1, 2] }, { organization_id: platform.organization_id }]) {
      const reply = await post(server.port, { method: 'overview.emit', ...target, data: fake(who) }, { key, host: 'localhost' });
      t.equal(reply.status, 403, `${who} posting overview.emit to ${JSON.stringify(target)} on /control is refused`);
      t.same(reply.json, { error: INTERNAL });
    }
    const ws = await socket(server.port, 'localhost');
    ws.ws.send(JSON.stringify({ requestId: 'emit', method: 'overview.emit', broadcast: true, apikey: key, data: fake(who) }));
    t.same(await frame(ws.frames, (entry) => entry.id === 'emit'), { id: 'emit', ok: false, error: INTERNAL }, `${who} sending overview.emit on /ws is refused`);
    ws.ws.terminate();
  }
  const local = await callControlSocket(controlSocketPath(dataDir), { envelope: { method: 'overview.emit', broadcast: true, data: fake('the control socket') } }, 20_000);
  t.same(local, { ok: false, error: { ...INTERNAL, status: 403 } }, 'the local control socket refuses it too');

  // A real event, after the attempts: the dashboard receives it, and nothing made up came before it.
  await post(server.port, { method: 'cordon', server: serverId, worker: 2, data: true }, { key: platform.adminKey, host: 'localhost' });
  await post(server.port, { method: 'cordon', server: serverId, worker: 2, data: false }, { key: platform.adminKey, host: 'localhost' });
  await frame(dashboard.frames, (entry) => entry.event === 'overview.event' && /worker 2: cordoned → ready/.test(entry.data.message));
  t.same(dashboard.frames.filter((entry) => entry.event === 'overview.event' && entry.data.kind === 'crash'), [], 'no made-up crash reached the dashboard');
});

t.test('the fleet event stream reaches subscribed platform sockets only', async (t) => {
  const admin = await socket(server.port, 'localhost');
  const viewer = await socket(server.port, 'localhost');
  const anonymous = await socket(server.port, 'localhost');
  const tenant = await socket(server.port, 'globex.test');
  const unsubscribed = await socket(server.port, 'localhost');
  t.teardown(() => [admin, viewer, anonymous, tenant, unsubscribed].forEach((entry) => entry.ws.terminate()));
  admin.ws.send(JSON.stringify({ requestId: 1, method: 'overview.subscribe', apikey: platform.adminKey }));
  viewer.ws.send(JSON.stringify({ requestId: 1, method: 'overview.subscribe', apikey: platformNoRights }));
  anonymous.ws.send(JSON.stringify({ requestId: 1, method: 'overview.subscribe' }));
  tenant.ws.send(JSON.stringify({ requestId: 1, method: 'overview.subscribe', apikey: globex.adminKey }));
  tenant.ws.send(JSON.stringify({ requestId: 2, method: 'socket.subscribe', apikey: globex.adminKey }));
  t.match(await frame(admin.frames, (entry) => entry.id === 1), { ok: true, result: { subscribed: true } });
  t.match(await frame(viewer.frames, (entry) => entry.id === 1), { ok: false, error: { code: 'permission_denied' } });
  t.match(await frame(anonymous.frames, (entry) => entry.id === 1), { ok: false, error: { code: 'forbidden' } });
  t.match(await frame(tenant.frames, (entry) => entry.id === 1), { ok: false, error: { code: 'platform_only' } });
  t.match(await frame(tenant.frames, (entry) => entry.id === 2), { ok: true }, "the tenant's own event subscription still works");

  const cordoned = await post(server.port, { method: 'cordon', server: serverId, worker: 1, data: true }, { key: platform.adminKey, host: 'localhost' });
  t.equal(cordoned.status, 200);
  const event = await frame(admin.frames, (entry) => entry.event === 'overview.event' && /worker 1: ready → cordoned/.test(entry.data.message));
  t.match(event.data, { server: serverId, kind: 'status', worker: 1, seq: Number, at: Number });
  await post(server.port, { method: 'cordon', server: serverId, worker: 1, data: false }, { key: platform.adminKey, host: 'localhost' });
  await frame(admin.frames, (entry) => entry.event === 'overview.event' && /worker 1: cordoned → ready/.test(entry.data.message));
  for (const [name, entry] of [['the key without the right', viewer], ['no key', anonymous], ['the tenant', tenant], ['a platform socket that did not subscribe', unsubscribed]] as const) {
    t.notOk(entry.frames.some((received) => received.event === 'overview.event'), `${name} received no fleet event`);
  }
});

t.test('GET /dashboard: a page with a strict policy, assets cached for good under their digest', async (t) => {
  const page = await request(server.port, '/dashboard');
  t.equal(page.status, 200);
  t.match(page.headers['content-type'], /^text\/html/);
  t.equal(page.headers['cache-control'], 'no-store');
  const csp = String(page.headers['content-security-policy']);
  for (const directive of ["default-src 'none'", "script-src 'self'", "style-src 'self'", "connect-src 'self'", "frame-ancestors 'none'"]) t.ok(csp.includes(directive), `CSP has ${directive}`);
  t.notMatch(csp, /unsafe-inline|unsafe-eval|\*/, 'nothing inline, no wildcard');
  t.notMatch(page.body, /<script>|<style>|\sstyle=|\son[a-z]+=/i, 'the page carries no inline script or style');
  const prefix = /src="(\/dashboard\/assets\/[^/"]+)\/app\.js"/.exec(page.body)?.[1];
  t.ok(prefix, 'the page names its versioned prefix');
  for (const file of ['app.js', 'style.css', 'vendor/preact.js', 'vendor/htm.js', 'icon.svg']) {
    const asset = await request(server.port, `${prefix}/${file}`);
    t.equal(asset.status, 200, `${file} is served`);
    t.equal(asset.headers['cache-control'], 'public, max-age=31536000, immutable');
    t.equal(asset.headers['x-content-type-options'], 'nosniff');
  }
  t.notMatch((await request(server.port, `${prefix}/vendor/preact.js`)).body, /sourceMappingURL/, 'no source map is promised');
  for (const missing of ['/dashboard/assets/0.0.0-000000000000/app.js', `${prefix}/nope.js`, `${prefix}/../../package.json`, `${prefix}/index.html`]) {
    const reply = await request(server.port, missing);
    t.equal(reply.status, 404, `${missing} is not found`);
    t.type(reply.json().error.code, 'string', 'with the error shape');
  }
});

t.test('with every worker cordoned the primary still serves the page and the overview', async (t) => {
  const cordon = await post(server.port, { method: 'cordon', server: serverId, master: true, data: true }, { key: platform.adminKey, host: 'localhost' });
  t.equal(cordon.status, 200);
  t.teardown(() => post(server.port, { method: 'cordon', server: serverId, master: true, data: false }, { key: platform.adminKey, host: 'localhost' }));
  const page = await request(server.port, '/dashboard');
  t.equal(page.status, 200, 'the page comes from the primary');
  t.match(String(page.headers['content-security-policy']), /default-src 'none'/);
  const prefix = /src="(\/dashboard\/assets\/[^/"]+)\/app\.js"/.exec(page.body)![1];
  t.equal((await request(server.port, `${prefix}/app.js`)).status, 200, 'and its assets');
  const summary = await post(server.port, { method: 'overview.server', master: true }, { key: platform.adminKey, host: 'localhost' });
  t.match(summary.json.replies[0].result, { status: 'fallback', workers: { cordoned: 2 } }, 'the overview says why');
  t.equal((await request(server.port, '/whoami')).status, 503, 'other routes still get the fallback');
});
