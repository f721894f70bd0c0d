import { spawn } from 'node:child_process';
import path from 'node:path';
import { createInterface } from 'node:readline';
import t from 'tap';
import { ServerProcess, cleanEnv } from '../helpers/server-process.js';
import { dataDirWithTenants, type Tenant } from '../helpers/tenants.js';
import { MESH_FIXTURE, meshConfig } from '../mesh/helpers.js';
import { killOnExit, run, tryRun, undoOnExit } from './cleanup.js';
import { skipReason } from './netns.js';

// A real server in a network namespace of its own with no route out: loopback and a veth pair whose both ends
// are in the namespace, one carrying three private addresses. A tenant's providers aimed at link-local, private and
// unique-local addresses are refused by the egress policy; were the policy broken, the link-local and IPv6 calls
// would fail here with ENETUNREACH (502), never reach a real network, and the private listener would count a
// connection. The platform's allow-listed private upstream lives at one of the namespace's own addresses.

const tag = String(process.pid);
const ns = `fpeg${tag}`;
const ALLOWED = '10.202.0.2';
const INTRANET = '10.202.0.3';
const UPSTREAM_PORT = 9000;
const HTTP_PORT = 8080;

const why = skipReason;
if (why) t.plan(0, why);

interface Answer {
  status: number;
  body?: string;
  error?: string;
  counts?: Record<string, number>;
}

/**
 * In the namespace: an upstream on the allowed address answering `{"ok":true}`, a listener on the intranet
 * address counting the connections it is offered, and a client sending the test's requests to the server. One
 * JSON request per line in, one answer per line out.
 */
const PROBE = `
  const http = require('node:http');
  const net = require('node:net');
  const counts = { intranet: 0 };
  http.createServer((request, response) => response.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true}')).listen(${UPSTREAM_PORT}, '${ALLOWED}');
  net.createServer((socket) => {
    counts.intranet++;
    socket.end('HTTP/1.1 200 OK\\r\\ncontent-type: application/json\\r\\ncontent-length: 17\\r\\nconnection: close\\r\\n\\r\\n{"intranet":true}');
  }).listen(${UPSTREAM_PORT}, '${INTRANET}', () => process.stdout.write('{"id":0}\\n'));
  require('node:readline').createInterface({ input: process.stdin }).on('line', (line) => {
    const { id, counts: wantCounts, path, headers, body } = JSON.parse(line);
    const reply = (fields) => process.stdout.write(JSON.stringify({ id, ...fields }) + '\\n');
    if (wantCounts) return reply({ status: 0, counts });
    const request = http.request('http://127.0.0.1:${HTTP_PORT}' + path, { method: 'POST', headers, agent: false, timeout: 15000 }, (response) => {
      let text = '';
      response.setEncoding('utf8');
      response.on('data', (chunk) => (text += chunk));
      response.on('end', () => reply({ status: response.statusCode, body: text }));
    });
    request.on('timeout', () => request.destroy(new Error('no answer within 15 s')));
    request.on('error', (error) => reply({ status: 0, error: error.message }));
    request.end(body);
  });`;

function startProbe(): { ready: Promise<void>; send(message: Record<string, unknown>): Promise<Answer>; stop(): void } {
  const child = spawn('ip', ['netns', 'exec', ns, process.execPath, '-e', PROBE], { detached: true, stdio: ['pipe', 'pipe', 'inherit'] });
  killOnExit(child.pid);
  const waiting = new Map<number, (answer: Answer) => void>();
  let next = 1;
  const ready = new Promise<void>((resolve) => waiting.set(0, () => resolve()));
  createInterface({ input: child.stdout! }).on('line', (line) => {
    const { id, ...answer } = JSON.parse(line) as Answer & { id: number };
    waiting.get(id)?.(answer);
    waiting.delete(id);
  });
  return {
    ready,
    send(message) {
      const id = next++;
      return new Promise((resolve) => {
        waiting.set(id, resolve);
        child.stdin!.write(`${JSON.stringify({ id, ...message })}\n`);
      });
    },
    stop: () => child.kill('SIGKILL'),
  };
}

if (!why) {
  let server: ServerProcess;
  let probe: ReturnType<typeof startProbe>;
  let platform: Tenant;
  let tenant: Tenant;

  const post = (who: Tenant, route: string, body: unknown) =>
    probe.send({ path: route, headers: { host: who.host, authorization: `Bearer ${who.adminKey}`, 'content-type': 'application/json' }, body: JSON.stringify(body) });

  /** Defines `name` for `who` and calls its one endpoint through `/api`. */
  async function callProvider(who: Tenant, name: string, baseUrl: string): Promise<Answer> {
    const created = await post(who, '/crud', { method: 'object.create', collection: 'apis', documents: [{ name, baseUrl, endpoints: { get: { method: 'get', path: '/' } } }] });
    if (created.status !== 200) throw new Error(`creating provider ${name}: ${created.status} ${created.body ?? created.error ?? ''}`);
    return post(who, '/api', { api: name, endpoint: 'get', method: 'get' });
  }

  t.before(async () => {
    undoOnExit(() => void tryRun('ip', ['netns', 'del', ns]));
    run('ip', ['netns', 'add', ns]);
    run('ip', ['-n', ns, 'link', 'set', 'lo', 'up']);
    // Both ends of the pair stay in the namespace: what leaves one end arrives at the other, nowhere else.
    run('ip', ['-n', ns, 'link', 'add', 'e0', 'type', 'veth', 'peer', 'name', 'e1']);
    for (const address of ['10.202.0.1', ALLOWED, INTRANET]) run('ip', ['-n', ns, 'addr', 'add', `${address}/24`, 'dev', 'e0']);
    run('ip', ['-n', ns, 'link', 'set', 'e0', 'up']);
    run('ip', ['-n', ns, 'link', 'set', 'e1', 'up']);
    const seeded = await dataDirWithTenants([
      { name: 'platform', hosts: ['platform.test'] },
      { name: 'tenant', hosts: ['tenant.test'] },
    ]);
    [platform, tenant] = seeded.tenants as [Tenant, Tenant];
    const config = meshConfig(`egress-${tag}`, path.join(seeded.dataDir, 'fleetplane.db'), {
      dataDir: seeded.dataDir,
      workers: 1,
      http: { port: HTTP_PORT, host: '127.0.0.1' },
      egress: { allow: [`${ALLOWED}/32`] },
    });
    const child = spawn('ip', ['netns', 'exec', ns, process.execPath, MESH_FIXTURE], { detached: true, stdio: ['pipe', 'pipe', 'pipe'], env: { ...cleanEnv(), FIXTURE_CONFIG: JSON.stringify(config) } });
    killOnExit(child.pid);
    server = new ServerProcess(child);
    await server.waitFor((event) => event.event === 'started', 60_000);
    await server.readyWorkers(1, 0, 60_000);
    probe = startProbe();
    await probe.ready;
  });
  t.teardown(async () => {
    probe?.stop();
    await server?.stop();
  });

  t.test("a tenant's providers aimed at link-local, private and unique-local addresses are refused before connecting", async (t) => {
    const cases: Array<[string, string, string]> = [
      ['metadata', 'http://169.254.169.254', 'link-local'],
      ['intranet', `http://${INTRANET}:${UPSTREAM_PORT}`, 'private'],
      ['neighbour', `http://[fe80::1]:${UPSTREAM_PORT}`, 'link-local'],
      ['ula', `http://[fd00::1]:${UPSTREAM_PORT}`, 'unique-local'],
      ['server-itself', `http://127.0.0.1:${HTTP_PORT}`, 'loopback'],
    ];
    for (const [name, baseUrl, rule] of cases) {
      const answer = await callProvider(tenant, name, baseUrl);
      t.equal(answer.status, 403, `${baseUrl}: ${answer.body ?? answer.error}`);
      t.match(JSON.parse(answer.body ?? '{}'), { error: { code: 'egress_refused', message: new RegExp(`\\(${rule} address\\)`) } }, `${baseUrl}: ${rule}`);
    }
    t.same((await probe.send({ counts: true })).counts, { intranet: 0 }, 'the intranet listener was never connected to');
  });

  t.test('the allow-listed private upstream is reached by a tenant, and the platform reaches the intranet by default', async (t) => {
    const allowed = await callProvider(tenant, 'allowed', `http://${ALLOWED}:${UPSTREAM_PORT}`);
    t.equal(allowed.status, 200, String(allowed.body ?? allowed.error));
    t.same(JSON.parse(allowed.body ?? '{}'), { status: 200, data: { ok: true } });
    const own = await callProvider(platform, 'intranet', `http://${INTRANET}:${UPSTREAM_PORT}`);
    t.equal(own.status, 200, String(own.body ?? own.error));
    t.same(JSON.parse(own.body ?? '{}'), { status: 200, data: { intranet: true } });
    t.same((await probe.send({ counts: true })).counts, { intranet: 1 }, "only the platform's call reached it");
  });
}
