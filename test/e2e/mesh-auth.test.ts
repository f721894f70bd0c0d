import t, { type Test } from 'tap';
import WebSocket from 'ws';
import { request, type ServerProcess } from '../helpers/server-process.js';
import { dialHeaders } from '../../src/mesh/handshake.js';
import { SECRET, deliveries, meshConfig, meshIds, startMeshServer, waitForPeers, type Result } from '../mesh/helpers.js';

const { dbPath, ids } = meshIds('a', 'b');
const [A, B] = ids as [string, string];
const servers: ServerProcess[] = [];
let a: ServerProcess;
let b: ServerProcess;
let meshUrlOfA: string;

t.before(async () => {
  [a, b] = await Promise.all(ids.map((id) => startMeshServer(meshConfig(id, dbPath, { workers: 1 }))));
  servers.push(a, b);
  await Promise.all(servers.map((server) => server.readyWorkers(1)));
  await Promise.all([waitForPeers(a, [B]), waitForPeers(b, [A])]);
  meshUrlOfA = a.events.find((event) => event.event === 'started')!.meshUrl as string;
});
t.teardown(() => Promise.all(servers.map((server) => server.stop())));

/**
 * Dials A's mesh port like a peer would. Had the handshake been accepted, the client would at once push an
 * envelope to every worker of A; the test checks it never arrives.
 */
function dial(headers: Record<string, string>): Promise<{ status?: number; opened: boolean; messageId: string }> {
  const messageId = crypto.randomUUID();
  return new Promise((resolve) => {
    const ws = new WebSocket(meshUrlOfA, { headers, perMessageDeflate: false });
    let opened = false;
    ws.on('open', () => {
      opened = true;
      const intruder = headers['x-fleetplane-server'] ?? 'anonymous';
      ws.send(JSON.stringify({ type: 'envelope', envelope: { method: 'probe', broadcast: true }, meta: { id: messageId, origin: { server: intruder, worker: 0 }, hops: 1 }, timeoutMs: 1000 }));
      setTimeout(() => ws.close(), 300);
    });
    ws.on('error', (error) => {
      const status = /Unexpected server response: (\d+)/.exec(error.message)?.[1];
      resolve({ status: status ? Number(status) : undefined, opened, messageId });
    });
    ws.on('close', () => resolve({ opened, messageId }));
  });
}

async function refusedAndNothingChanged(t: Test, attempt: { status?: number; opened: boolean; messageId: string }, status: number, reason: RegExp, from: number): Promise<void> {
  t.equal(attempt.opened, false, 'no socket was opened');
  t.equal(attempt.status, status, `refused with HTTP ${status}`);
  const logged = await a.waitFor((event) => event.msg === 'mesh handshake refused' && reason.test(String(event.reason)), 5_000, from);
  t.match(logged, { level: 40, status, reason }, 'A logged the refusal and why');
  t.same((await a.command<any[]>('mesh.peers')).map((peer) => peer.server), [B], 'A is still linked to B only');
  t.equal(a.count((event) => event.event === 'mesh:link:open'), 1, 'no link was opened besides B');
  const counts = await deliveries(a, attempt.messageId);
  t.same([...counts.values()], [0, 0, 0, 0], 'the intruder envelope reached no process');
}

t.test('a handshake signed with the wrong secret is refused and logged; nothing changes', async (t) => {
  const mark = a.events.length;
  const { headers } = dialHeaders({ server: 'z-intruder', cluster: 'mesh-test', to: A }, 'not-the-cluster-secret-at-all');
  await refusedAndNothingChanged(t, await dial(headers), 401, /bad handshake signature/, mark);
});

t.test('a plain WebSocket client (no handshake) is refused and logged; nothing changes', async (t) => {
  const mark = a.events.length;
  await refusedAndNothingChanged(t, await dial({}), 401, /not a mesh handshake/, mark);
});

t.test('a replayed handshake is refused; so is one claiming an id already linked', async (t) => {
  const mark = a.events.length;
  const { headers } = dialHeaders({ server: B, cluster: 'mesh-test', to: A }, SECRET);
  await refusedAndNothingChanged(t, await dial(headers), 409, /already linked/, mark);
  const again = a.events.length;
  await refusedAndNothingChanged(t, await dial(headers), 401, /replayed handshake/, again);
});

t.test('a stale handshake, one claiming the receiver id, and one meant for another server are refused', async (t) => {
  let mark = a.events.length;
  const stale = dialHeaders({ server: 'z-late', cluster: 'mesh-test', to: A }, SECRET, Date.now() - 5 * 60_000).headers;
  await refusedAndNothingChanged(t, await dial(stale), 401, /outside the time window/, mark);
  mark = a.events.length;
  const self = dialHeaders({ server: A, cluster: 'mesh-test', to: A }, SECRET).headers;
  await refusedAndNothingChanged(t, await dial(self), 403, /this server's id/, mark);
  mark = a.events.length;
  const elsewhere = dialHeaders({ server: 'z-other', cluster: 'mesh-test', to: B }, SECRET).headers;
  await refusedAndNothingChanged(t, await dial(elsewhere), 403, /addressed to/, mark);
  mark = a.events.length;
  const otherGroup = dialHeaders({ server: 'z-other', cluster: 'another-group', to: A }, SECRET).headers;
  await refusedAndNothingChanged(t, await dial(otherGroup), 403, /cluster group/, mark);
});

t.test('after the refusals the mesh still delivers exactly once', async (t) => {
  const result = await b.command<Result>('request', { envelope: { method: 'probe', broadcast: true } });
  t.same(result.replies.map((reply) => reply.server).sort(), [A, B]);
  const counts = await deliveries(b, result.id);
  t.same([...counts.entries()].filter(([, count]) => count > 0).map(([name]) => name).sort(), [`${A}/worker 1`, `${B}/worker 1`]);
  t.same([...counts.values()].filter((count) => count > 0), [1, 1]);
});

t.test('every worker of A cordoned and no fallback.redirect: 307 to the public URL of running peer B', async (t) => {
  await a.command('cordon', { value: true });
  t.teardown(() => a.command('cordon', { value: false }));
  const redirect = await request(a.port, '/some/path?x=1&y=two');
  t.equal(redirect.status, 307);
  t.equal(redirect.headers.location, `http://127.0.0.1:${b.port}/some/path?x=1&y=two`, 'Location = B public URL + path + query');
  t.equal(redirect.headers['cache-control'], 'no-store');
  t.equal(redirect.headers.connection, 'close');
  const followed = await request(b.port, '/whoami');
  t.match(followed.json(), { server: B }, 'B serves the redirected request');
  t.equal((await request(a.port, '/readyz')).status, 503, 'A stays out of the load balancer meanwhile');
});
