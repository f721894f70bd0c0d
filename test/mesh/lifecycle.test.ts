import t from 'tap';
import { createServer } from 'node:net';
import { inProcessMesh, point, until, type InProcessMesh } from './in-process.js';
import { past, scaled, until as waitUntil } from '../helpers/wait.js';

// A starved process answers pings late: only a much longer silence is a dead link here.
const FAST = { discoveryIntervalMs: 150, pingIntervalMs: 500, pongTimeoutMs: scaled(3_000), reconnect: { baseMs: 40, maxDelayMs: 120, jitterMinMs: 5, jitterMaxMs: 10, maxAttempts: 3 } };
const linked = (mesh: InProcessMesh, peer: string) => async () => (await mesh.mesh.peers()).some((entry) => entry.server === peer);

async function waitLinked(mesh: InProcessMesh, peer: string): Promise<void> {
  await waitUntil(`${mesh.id} to link to ${peer}`, async () => ((await linked(mesh, peer)()) ? true : undefined));
}

const count = (mesh: InProcessMesh, event: string, from = 0) => mesh.events.slice(from).filter((entry) => entry.event === event);

t.test('close 1000 stops the dialer; only a restarted peer (new startedAt in the inventory) is dialed again', async (t) => {
  const dialer = await inProcessMesh('m-b', FAST);
  let acceptor = await inProcessMesh('m-a', FAST);
  t.teardown(() => {
    dialer.mesh.close(1000);
    acceptor.mesh.close(1000);
  });
  point(dialer, acceptor, 'boot-1');
  dialer.mesh.join();
  await waitLinked(acceptor, 'm-b');
  await waitLinked(dialer, 'm-a');
  t.match(await acceptor.mesh.peers(), [{ server: 'm-b', direction: 'in', publicUrl: 'http://m-b.example.test' }]);

  const mark = dialer.events.length;
  acceptor.mesh.close(1000);
  await until(() => count(dialer, 'link:close', mark).length === 1, 'the close');
  t.equal(count(dialer, 'link:close', mark)[0]!.code, 1000);
  await past(Date.now() + scaled(1_000)); // several discoveries (every 150 ms) and several schedule delays
  t.same(count(dialer, 'reconnect', mark), [], 'no retry while the inventory still shows the same start');

  acceptor = await inProcessMesh('m-a', FAST);
  point(dialer, acceptor, 'boot-2');
  await waitLinked(dialer, 'm-a');
  t.same(count(dialer, 'reconnect', mark), [], 'the restarted peer was dialed at once, not on the retry schedule');
});

t.test('close 1012 and abnormal closes retry on the schedule; attempts start at 0 again after a link', async (t) => {
  const dialer = await inProcessMesh('m-b', FAST);
  let acceptor = await inProcessMesh('m-a', FAST);
  t.teardown(() => {
    dialer.mesh.close(1000);
    acceptor.mesh.close(1000);
  });
  point(dialer, acceptor, 'boot-1');
  dialer.mesh.join();
  await waitLinked(dialer, 'm-a');

  let mark = dialer.events.length;
  acceptor.mesh.close(1012);
  await until(() => count(dialer, 'reconnect', mark).length >= 2, 'two retries');
  t.equal(count(dialer, 'link:close', mark)[0]!.code, 1012);
  t.same(count(dialer, 'reconnect', mark).slice(0, 2).map((event) => [event.attempt, event.code ?? null]), [[0, 1012], [1, 1006]], 'retry after 1012, then after each failed dial');

  // Same address, new process: the next retry (or discovery) gets through.
  const port = Number(new URL(acceptor.url).port);
  acceptor = await inProcessMesh('m-a', { ...FAST, port });
  await waitLinked(dialer, 'm-a');

  mark = dialer.events.length;
  acceptor.mesh.close(1001);
  await until(() => count(dialer, 'reconnect', mark).length >= 1, 'a retry');
  t.equal(count(dialer, 'reconnect', mark)[0]!.attempt, 0, 'the budget restarted after the successful link');
});

t.test(`at most maxAttempts retries until the next discovery, which grants a new budget`, async (t) => {
  const blocker = createServer();
  await new Promise<void>((resolve) => blocker.listen(0, '127.0.0.1', resolve));
  const deadPort = (blocker.address() as { port: number }).port;
  await new Promise((resolve) => blocker.close(resolve));
  const dialer = await inProcessMesh('m-b', { ...FAST, discoveryIntervalMs: 60_000 });
  t.teardown(() => dialer.mesh.close(1000));
  dialer.targets.push({ id: 'm-a', url: `ws://127.0.0.1:${deadPort}`, startedAt: 'boot-1' });
  dialer.mesh.join();
  await until(() => count(dialer, 'giveup').length === 1, 'give up');
  t.same(count(dialer, 'reconnect').map((event) => event.attempt), [0, 1, 2], 'three attempts (maxAttempts: 3)');
  t.match(count(dialer, 'giveup')[0], { peer: 'm-a', attempts: 3 });
  await past(Date.now() + scaled(400));
  t.equal(count(dialer, 'reconnect').length, 3, 'nothing more until a discovery');
  t.ok(dialer.logs.some((line) => line.msg === 'mesh peer unreachable: waiting for the next discovery'));
});

t.test('links carry envelopes both ways with replies merged; org scope follows the advertisements', async (t) => {
  const a = await inProcessMesh('m-a', FAST);
  const b = await inProcessMesh('m-b', FAST);
  const c = await inProcessMesh('m-c', FAST);
  t.teardown(() => [a, b, c].forEach((mesh) => mesh.mesh.close(1000)));
  b.targets.push({ id: 'm-a', url: a.url });
  c.targets.push({ id: 'm-a', url: a.url }, { id: 'm-b', url: b.url });
  b.organizations.push('org-b');
  [b, c].forEach((mesh) => mesh.mesh.join());
  await Promise.all([waitLinked(a, 'm-b'), waitLinked(a, 'm-c'), waitLinked(b, 'm-c')]);

  const meta = { id: crypto.randomUUID(), origin: { server: 'm-a', worker: 2 }, hops: 1 };
  const all = await a.mesh.forward({ method: 'probe', broadcast: true, data: 7, meta }, { all: true }, true, scaled(1_000));
  t.same(all.replies.map((reply) => reply.server).sort(), ['m-b', 'm-c'], 'one reply per peer');
  t.same(all.missing, []);
  const scoped = await a.mesh.forward({ method: 'probe', organization_id: 'org-b', meta: { ...meta, id: crypto.randomUUID() } }, { all: true, organization_id: 'org-b' }, true, scaled(1_000));
  t.same(scoped.replies.map((reply) => reply.server), ['m-b'], 'only the peer that serves org-b');

  b.mesh.organizationInactive('org-b');
  await until(() => !scopedPeers(a).includes('m-b'), 'withdrawn');
  const later = await a.mesh.forward({ method: 'probe', organization_id: 'org-b', meta: { ...meta, id: crypto.randomUUID() } }, { all: true, organization_id: 'org-b' }, true, scaled(1_000));
  t.same(later.replies, [], 'after mesh.orgDeleted nobody gets it');
  c.mesh.organizationActive('org-b');
  await until(() => scopedPeers(a).includes('m-c'), 'announced');
  const moved = await a.mesh.forward({ method: 'probe', organization_id: 'org-b', meta: { ...meta, id: crypto.randomUUID() } }, { all: true, organization_id: 'org-b' }, true, scaled(1_000));
  t.same(moved.replies.map((reply) => reply.server), ['m-c'], 'org.active adds the new server');

  const named = await a.mesh.forward({ method: 'probe', server: ['m-c', 'm-gone'], meta: { ...meta, id: crypto.randomUUID() } }, { servers: ['m-c', 'm-gone'] }, true, scaled(1_000));
  t.same(named.missing, [{ server: 'm-gone' }], 'a named server without a link is missing');
  t.equal(a.mesh.peerUrl() !== undefined, true, 'a running peer is a fallback target');
  t.same(new Set([a.mesh.peerUrl(), a.mesh.peerUrl()]), new Set(['http://m-b.example.test', 'http://m-c.example.test']), 'rotating over the linked peers');

  function scopedPeers(mesh: InProcessMesh): string[] {
    return [...(mesh.mesh as unknown as { links: Map<string, { organizations: Set<string> }> }).links.entries()].filter(([, link]) => link.organizations.has('org-b')).map(([peer]) => peer);
  }
});

t.test('a peer that stops answering pings is dropped, and the dialer retries', async (t) => {
  const dialer = await inProcessMesh('m-b', { ...FAST, pongTimeoutMs: 500 });
  // Only the dialer pings here, so it is the one that notices.
  const acceptor = await inProcessMesh('m-a', { ...FAST, pingIntervalMs: 60_000 });
  t.teardown(() => [dialer, acceptor].forEach((mesh) => mesh.mesh.close(1000)));
  point(dialer, acceptor);
  dialer.mesh.join();
  await waitLinked(dialer, 'm-a');
  const mark = dialer.events.length;
  // Freeze the acceptor's side of the socket: it reads nothing, so it answers no ping.
  const link = (acceptor.mesh as unknown as { links: Map<string, { ws: { _socket: { pause(): void } } }> }).links.get('m-b')!;
  link.ws._socket.pause();
  await until(() => count(dialer, 'link:close', mark).length === 1, 'the drop', 5_000);
  t.equal(count(dialer, 'link:close', mark)[0]!.code, 1006, 'dropped as an abnormal close');
  t.ok(dialer.logs.some((line) => line.msg === 'mesh peer did not answer a ping: dropping the link'));
  await until(() => count(dialer, 'reconnect', mark).length >= 1, 'a retry');
});

t.test('a peer whose ping waits unanswered is no fallback target, though its link stays until the pong timeout', async (t) => {
  // A pong timeout far longer than the test: the link is not dropped here, only found not answering.
  const dialer = await inProcessMesh('m-b', { ...FAST, pingIntervalMs: 100, pongTimeoutMs: scaled(120_000) });
  const acceptor = await inProcessMesh('m-a', { ...FAST, pingIntervalMs: 60_000 });
  t.teardown(() => [dialer, acceptor].forEach((mesh) => mesh.mesh.close(1000)));
  point(dialer, acceptor);
  dialer.mesh.join();
  await waitLinked(dialer, 'm-a');
  await until(() => dialer.mesh.peerUrl() === 'http://m-a.example.test', 'the peer offered while it answers');
  const mark = dialer.events.length;
  // Freeze the acceptor's side of the socket: it reads nothing, so it answers no ping.
  const socket = (acceptor.mesh as unknown as { links: Map<string, { ws: { _socket: { pause(): void; resume(): void } } }> }).links.get('m-b')!.ws._socket;
  socket.pause();
  await until(() => dialer.mesh.peerUrl() === undefined, 'the peer withdrawn from the fallback', scaled(10_000));
  t.match(await dialer.mesh.peers(), [{ server: 'm-a' }], 'the link itself is still up');
  t.equal(count(dialer, 'link:close', mark).length, 0, 'and was not dropped');
  socket.resume();
  await until(() => dialer.mesh.peerUrl() === 'http://m-a.example.test', 'offered again once it answers', scaled(10_000));
});
