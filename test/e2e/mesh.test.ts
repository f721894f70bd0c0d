import t, { type Test } from 'tap';
import { request, type ServerProcess } from '../helpers/server-process.js';
import { deliveries, meshConfig, meshIds, startMeshServer, waitForPeerState, waitForPeers, type Result } from '../mesh/helpers.js';

const { dbPath, ids } = meshIds('a', 'b', 'c');
const [A, B, C] = ids as [string, string, string];
const servers: ServerProcess[] = [];
let a: ServerProcess;
let b: ServerProcess;
let c: ServerProcess;

t.before(async () => {
  [a, b, c] = await Promise.all(ids.map((id) => startMeshServer(meshConfig(id, dbPath, { organizations: { graceMs: 300 } }))));
  servers.push(a, b, c);
  await Promise.all(servers.map((server) => server.readyWorkers(2)));
});
t.teardown(() => Promise.all(servers.map((server) => server.stop())));

const label = (reply: { result?: any }) => `${reply.result.server}/${reply.result.primary ? 'primary' : `worker ${reply.result.worker}`}`;
const everyProcess = () => ids.flatMap((id) => [`${id}/primary`, `${id}/worker 1`, `${id}/worker 2`]);

/** Sends `envelope` from `from`, then checks that exactly the `expected` processes got it, once each. */
async function deliveredExactly(t: Test, from: ServerProcess, envelope: Record<string, unknown>, expected: string[], name: string): Promise<Result> {
  const result = await from.command<Result>('request', { envelope: { method: 'probe', ...envelope } });
  t.same(result.replies.map(label).sort(), [...expected].sort(), `${name}: replies come from exactly the targets`);
  t.same(result.missing, [], `${name}: nobody missing`);
  const counts = await deliveries(from, result.id);
  t.same([...counts.keys()].sort(), everyProcess().sort(), `${name}: all nine processes counted`);
  for (const [process, count] of counts) t.equal(count, expected.includes(process) ? 1 : 0, `${name}: ${process} received it ${expected.includes(process) ? 'once' : 'never'}`);
  return result;
}

t.test('three servers form a full mesh with exactly one link per pair, dialed by the larger id', async (t) => {
  const [peersOfA, peersOfB, peersOfC] = await Promise.all([waitForPeers(a, [B, C]), waitForPeers(b, [A, C]), waitForPeers(c, [A, B])]);
  t.same(peersOfA.map((peer) => [peer.server, peer.direction]), [[B, 'in'], [C, 'in']], 'A is dialed by both');
  t.same(peersOfB.map((peer) => [peer.server, peer.direction]), [[A, 'out'], [C, 'in']], 'B dials A and is dialed by C');
  t.same(peersOfC.map((peer) => [peer.server, peer.direction]), [[A, 'out'], [B, 'out']], 'C dials both');
  for (const server of servers) t.equal(server.count((event) => event.event === 'mesh:link:open'), 2, 'two links opened per server, no duplicates');
  t.equal(peersOfA.find((peer) => peer.server === B)!.publicUrl, `http://127.0.0.1:${b.port}`, 'peers advertise their public URL');
  const inventory = await a.command<any[]>('inventory');
  t.same(inventory.map((record) => [record._id, record.cluster_id, record.master.status]), ids.map((id) => [id, 'mesh-test', 'running']), 'each primary recorded itself running in the shared inventory');
  t.match(inventory[1].master, { publicUrl: `http://127.0.0.1:${b.port}`, meshUrl: /^ws:\/\/127\.0\.0\.1:\d+$/, pid: Number, startedAt: String });
});

t.test('{ server: B, worker: 1 } from A reaches exactly that process; from a worker, the origin is kept', async (t) => {
  await deliveredExactly(t, a, { server: B, worker: 1 }, [`${B}/worker 1`], 'server B worker 1');
  await deliveredExactly(t, a, { server: [B, C], master: true }, [`${B}/primary`, `${C}/primary`], 'two servers, primaries');
  await deliveredExactly(t, c, { server: [A, C], worker: 2 }, [`${A}/worker 2`, `${C}/worker 2`], 'itself and a peer');

  const reply = await request(a.port, '/fixture/request', { body: { envelope: { method: 'probe', server: C, worker: 2 } }, timeoutMs: 20_000 });
  t.equal(reply.status, 200);
  const result = reply.json().result as Result;
  t.same(result.replies.map(label), [`${C}/worker 2`]);
  t.same(result.replies[0]!.result.origin, { server: A, worker: reply.json().from }, 'origin names the sending worker of A');
  t.equal(result.replies[0]!.result.hops, 1, 'one hop through the mesh');
});

t.test('broadcast reaches every worker of every server once, and request() gathers the replies', async (t) => {
  const workers = ids.flatMap((id) => [`${id}/worker 1`, `${id}/worker 2`]);
  await deliveredExactly(t, b, { broadcast: true }, workers, 'broadcast from B');
  await deliveredExactly(t, a, { broadcast: true, master: true }, [...workers, ...ids.map((id) => `${id}/primary`)], 'broadcast + master from A');

  const status = await c.command<Result>('request', { envelope: { method: 'status', broadcast: true } });
  t.equal(status.replies.length, 6, 'six workers answered');
  t.same([...new Set(status.replies.map((reply) => reply.server))].sort(), ids, 'from all three servers');
  for (const entry of status.replies) t.match(entry, { ok: true, result: { server: entry.server, status: 'ready', pid: Number } });
  t.same(status.missing, []);

  const targeted = await a.command<Result>('request', { envelope: { method: 'no.such.method', server: B, worker: 1 } });
  t.match(targeted.replies, [{ server: B, worker: 1, ok: false, error: { code: 'unknown_method' } }], "a peer's error replies come back like local ones");
});

t.test('organization_id reaches only the servers (and workers) serving it; mesh.orgDeleted withdraws it', async (t) => {
  const served = (await request(b.port, '/fixture/org?org=org-x')).json();
  t.equal(served.server, B);
  await waitForPeerState(a, (peers) => peers.find((peer) => peer.server === B)?.organizations.includes('org-x') ?? false);
  await waitForPeerState(c, (peers) => peers.find((peer) => peer.server === B)?.organizations.includes('org-x') ?? false);
  t.same((await a.command<any[]>('mesh.peers')).find((peer) => peer.server === C).organizations, [], 'C serves no organization');
  await deliveredExactly(t, a, { organization_id: 'org-x' }, [`${B}/worker ${served.worker}`], 'organization scope from A');
  await deliveredExactly(t, c, { organization_id: 'org-x', broadcast: true }, [`${B}/worker ${served.worker}`], 'organization scope with broadcast from C');

  // A socket of org-y on C, then closed: after the grace period C tells its peers the organization is gone.
  const opened = (await request(c.port, '/fixture/org?org=org-y&action=open')).json();
  // The advertisement reaches each peer on its own link; the request goes out from B, so B must have it.
  await waitForPeerState(a, (peers) => peers.find((peer) => peer.server === C)?.organizations.includes('org-y') ?? false);
  await waitForPeerState(b, (peers) => peers.find((peer) => peer.server === C)?.organizations.includes('org-y') ?? false);
  await deliveredExactly(t, b, { organization_id: 'org-y' }, [`${C}/worker ${opened.worker}`], 'org-y while C serves it');
  let closedBy = -1;
  for (let i = 0; i < 20 && closedBy !== opened.worker; i++) {
    // Only the worker that holds the socket can close it; connections are handed out round-robin.
    const reply = await request(c.port, '/fixture/org?org=org-y&action=close');
    closedBy = reply.json().worker;
  }
  t.equal(closedBy, opened.worker, 'the socket was closed by its worker');
  await c.waitFor((event) => event.event === 'organization.inactive' && event.organization_id === 'org-y', 10_000);
  await waitForPeerState(a, (peers) => !(peers.find((peer) => peer.server === C)?.organizations.includes('org-y') ?? true));
  await waitForPeerState(b, (peers) => !(peers.find((peer) => peer.server === C)?.organizations.includes('org-y') ?? true));
  const after = await b.command<Result>('request', { envelope: { method: 'probe', organization_id: 'org-y' } });
  t.same(after.replies, [], 'no server serves org-y any more');
});

t.test('mesh.send reaches a handler on the named peer primary; unknown methods answer with an error', async (t) => {
  const echo = await a.command<any>('mesh.send', { message: { method: 'mesh.echo', server: C, data: { n: 42 } } });
  t.same(echo, { server: C, ok: true, result: { echo: { n: 42 }, from: A, at: C } });
  const unknown = await a.command<any>('mesh.send', { message: { method: 'mesh.nope', server: B } });
  t.match(unknown, { server: B, ok: false, error: { code: 'unknown_method', message: /mesh\.nope/ } });
  const failing = await c.command<any>('mesh.send', { message: { method: 'mesh.explode', server: A } });
  t.match(failing, { server: A, ok: false, error: { code: 'handler_failed', message: 'mesh handler exploded on purpose' } });
  await t.rejects(a.command('mesh.send', { message: { method: 'custom', server: B } }), /bad_request/, 'only mesh.* methods');
  await t.rejects(a.command('mesh.send', { message: { method: 'mesh.echo', server: 'nobody' } }), /unavailable/, 'a server without a link');

  const fromWorker = await request(b.port, '/fixture/mesh-send', { body: { method: 'mesh.echo', server: A, data: 'hi' }, timeoutMs: 20_000 });
  t.equal(fromWorker.status, 200);
  t.same(fromWorker.json().result, { server: A, ok: true, result: { echo: 'hi', from: B, at: A } }, "a worker's mesh.send goes through its primary");
});

t.test("the design's custom mesh command: mesh.send with no handler reaches the listeners of its method on the peer primary", async (t) => {
  const sent = await a.command<any>('mesh.send', { message: { method: 'mesh.custom_command', server: C, data: { key: 'value' } } });
  t.same(sent, { server: C, ok: true, result: { event: 'mesh.custom_command', listeners: 1 } });
  t.same(await c.command('mesh.heard'), [{ data: { key: 'value' }, from: A }], "C's primary heard it once, from A");
  t.same(await a.command('mesh.heard'), [], 'the sender heard nothing');

  const fromWorker = await request(b.port, '/fixture/mesh-send', { body: { method: 'mesh.custom_command', server: A, data: 'hi' }, timeoutMs: 20_000 });
  t.equal(fromWorker.status, 200);
  t.same(fromWorker.json().result, { server: A, ok: true, result: { event: 'mesh.custom_command', listeners: 1 } }, "a worker's mesh.send goes through its primary");
  t.same(await a.command('mesh.heard'), [{ data: 'hi', from: B }]);
  t.same(await b.command('mesh.heard'), [], 'B itself heard nothing');

  const unheard = await a.command<any>('mesh.send', { message: { method: 'mesh.nobody_listens', server: B } });
  t.match(unheard, { server: B, ok: false, error: { code: 'unknown_method', message: /mesh\.nobody_listens/ } }, 'no handler and no listener: unknown_method');
});

t.test('a server named but not linked is reported missing; nothing else changes', async (t) => {
  const result = await a.command<Result>('request', { envelope: { method: 'probe', server: [B, 'zz-not-running'], master: true } });
  t.same(result.replies.map(label), [`${B}/primary`]);
  t.same(result.missing, [{ server: 'zz-not-running' }]);
});
