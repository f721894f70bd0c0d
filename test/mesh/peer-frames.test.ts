import t from 'tap';
import { randomUUID } from 'node:crypto';
import WebSocket from 'ws';
import { dialHeaders } from '../../src/mesh/handshake.js';
import { ABUSE_LIMIT } from '../../src/mesh/link.js';
import { MeshError } from '../../src/mesh/errors.js';
import { SECRET } from './helpers.js';
import { inProcessMesh, until, type InProcessMesh } from './in-process.js';
import { scaled } from '../helpers/wait.js';

const MAX_FRAME = 16 * 1024;

/** A peer of `mesh` driven by hand: authenticated like a real one (its hello sent unless `greet` is false), then free to send anything. */
async function rawPeer(mesh: InProcessMesh, { id = 'z-peer', greet = true } = {}): Promise<{ ws: WebSocket; frames: any[]; closed: Promise<number> }> {
  const { headers } = dialHeaders({ server: id, cluster: 'unit', to: mesh.id }, SECRET);
  const ws = new WebSocket(mesh.url, { headers, perMessageDeflate: false });
  const frames: any[] = [];
  ws.on('message', (data) => frames.push(JSON.parse(String(data))));
  const closed = new Promise<number>((resolve) => ws.on('close', (code) => resolve(code)));
  await new Promise((resolve, reject) => {
    ws.once('open', resolve);
    ws.once('error', reject);
  });
  await until(() => frames.some((frame) => frame.type === 'hello'), 'hello');
  if (greet) {
    ws.send(JSON.stringify({ type: 'hello', organizations: [] }));
    await until(() => mesh.events.some((entry) => entry.event === 'link:open' && entry.peer === id), 'link:open');
  }
  return { ws, frames, closed };
}

const next = async (frames: any[], predicate: (frame: any) => boolean) => {
  await until(() => frames.some(predicate), 'a frame');
  return frames.splice(frames.findIndex(predicate), 1)[0];
};

t.test('malformed and oversized frames are refused one by one with an error; the link stays', async (t) => {
  const mesh = await inProcessMesh('m-a', { maxFrameBytes: MAX_FRAME });
  t.teardown(() => mesh.mesh.close(1000));
  const { ws, frames } = await rawPeer(mesh);

  ws.send('{"type": "call", ');
  t.match(await next(frames, (frame) => frame.type === 'error'), { code: 'bad_json' });
  ws.send(JSON.stringify({ type: 'call', id: 7, method: 'mesh.echo', data: 'x'.repeat(MAX_FRAME) }));
  t.match(await next(frames, (frame) => frame.type === 'error'), { code: 'too_large', message: /limit is 16384/ });
  ws.send(Buffer.from([1, 2, 3]), { binary: true });
  t.match(await next(frames, (frame) => frame.type === 'error'), { code: 'binary_frame' });
  ws.send(JSON.stringify({ type: 'call', id: 8, method: 'status' }));
  t.match(await next(frames, (frame) => frame.type === 'error'), { id: 8, code: 'invalid_frame' }, 'the refusal carries the frame id');
  ws.send(JSON.stringify({ type: 'envelope', id: 9, envelope: { method: 'probe' }, meta: { id: randomUUID(), origin: { server: 'z-peer', worker: 0 }, hops: 1 }, timeoutMs: 100 }));
  t.match(await next(frames, (frame) => frame.type === 'error'), { id: 9, code: 'no_target' }, 'an envelope the router refuses');
  t.equal(mesh.routed.length, 0, 'nothing was routed');

  mesh.mesh.handle('mesh.echo', (data, from) => ({ data, from: from.server }));
  ws.send(JSON.stringify({ type: 'call', id: 10, method: 'mesh.echo', data: 'still here' }));
  t.same(await next(frames, (frame) => frame.id === 10), { type: 'result', id: 10, ok: true, result: { data: 'still here', from: 'z-peer' } }, 'the link still works');
  t.equal(ws.readyState, WebSocket.OPEN);
  t.ok(mesh.logs.some((line) => line.msg === 'mesh frame refused' && line.code === 'too_large'), 'refusals are logged');
  ws.close();
});

t.test('a peer cannot speak for another server, nor deliver one envelope twice', async (t) => {
  const mesh = await inProcessMesh('m-a');
  t.teardown(() => mesh.mesh.close(1000));
  const { ws, frames } = await rawPeer(mesh);
  const spoofed = { type: 'envelope', id: 1, envelope: { method: 'probe', broadcast: true }, meta: { id: randomUUID(), origin: { server: 'z-other', worker: 0 }, hops: 1 }, timeoutMs: 500 };
  ws.send(JSON.stringify(spoofed));
  t.match(await next(frames, (frame) => frame.id === 1), { type: 'error', code: 'bad_origin' });

  const envelope = { type: 'envelope', id: 2, envelope: { method: 'probe', broadcast: true, data: 'once' }, meta: { id: randomUUID(), origin: { server: 'z-peer', worker: 3 }, hops: 1 }, timeoutMs: scaled(500) };
  ws.send(JSON.stringify(envelope));
  t.same(await next(frames, (frame) => frame.id === 2), { type: 'replies', id: 2, replies: [{ server: 'm-a', worker: 1, ok: true, result: 'once' }], missing: [] });
  ws.send(JSON.stringify({ ...envelope, id: 3 }));
  t.match(await next(frames, (frame) => frame.id === 3), { type: 'error', code: 'duplicate' });
  t.equal(mesh.routed.length, 1, 'routed once');
  t.match(mesh.routed[0], { meta: envelope.meta, wantReplies: true }, "routed with the sender's metadata");
  ws.close();
});

t.test('unknown mesh.* methods and failing handlers answer with an error', async (t) => {
  const mesh = await inProcessMesh('m-a');
  t.teardown(() => mesh.mesh.close(1000));
  mesh.mesh.handle('mesh.fail', () => {
    throw new Error('nope');
  });
  mesh.mesh.handle('mesh.cyclic', () => {
    const value: Record<string, unknown> = {};
    value.self = value;
    return value;
  });
  const { ws, frames } = await rawPeer(mesh);
  ws.send(JSON.stringify({ type: 'call', id: 1, method: 'mesh.unknown' }));
  t.same(await next(frames, (frame) => frame.id === 1), { type: 'result', id: 1, ok: false, error: { code: 'unknown_method', message: 'no mesh handler for "mesh.unknown"' } });
  ws.send(JSON.stringify({ type: 'call', id: 2, method: 'mesh.fail' }));
  t.match(await next(frames, (frame) => frame.id === 2), { ok: false, error: { code: 'handler_failed', message: 'nope' } });
  ws.send(JSON.stringify({ type: 'call', id: 3, method: 'mesh.cyclic' }));
  t.match(await next(frames, (frame) => frame.id === 3), { ok: false, error: { code: 'handler_failed', message: /circular/ } }, 'a reply that is not JSON');
  t.throws(() => mesh.mesh.handle('status', () => 1), /mesh\.<name>/, 'handlers are registered under mesh.* only');
  ws.close();
});

t.test(`a peer that keeps sending refused frames (> ${ABUSE_LIMIT} in the window) is closed with 1008`, async (t) => {
  const mesh = await inProcessMesh('m-a');
  t.teardown(() => mesh.mesh.close(1000));
  const { ws, frames, closed } = await rawPeer(mesh);
  for (let i = 0; i < ABUSE_LIMIT; i++) ws.send('not json');
  await until(() => frames.filter((frame) => frame.type === 'error').length === ABUSE_LIMIT, 'ten refusals');
  t.equal(ws.readyState, WebSocket.OPEN, `${ABUSE_LIMIT} refusals are tolerated`);
  ws.send('not json either');
  t.equal(await closed, 1008, 'then the link is closed with policy violation');
  await until(() => mesh.events.some((event) => event.event === 'link:close'), 'link:close');
  t.same(await mesh.mesh.peers(), [], 'the peer is gone');
  t.ok(mesh.logs.some((line) => /closing the link \(1008\)/.test(line.msg)), 'and it is logged');
});

t.test('sends past the per-link buffer cap fail with an error instead of queueing', async (t) => {
  const mesh = await inProcessMesh('m-a', { maxBufferedBytes: 256 * 1024 });
  t.teardown(() => mesh.mesh.close(1000));
  const { ws } = await rawPeer(mesh);
  // The peer stops reading: everything A sends piles up in the kernel, then in A's send buffer.
  (ws as unknown as { _socket: { pause(): void } })._socket.pause();
  const data = 'x'.repeat(64 * 1024);
  let failure: unknown;
  let sent = 0;
  const pending: Array<Promise<unknown>> = [];
  for (; sent < 2_000 && !failure; sent++) {
    // No reply ever comes: the timeout must not fire before the buffer is full, however slow this loop runs.
    const reply = mesh.mesh.send({ method: 'mesh.echo', server: 'z-peer', data, timeoutMs: scaled(2_000) });
    pending.push(reply.catch((error) => error));
    // A call fails synchronously inside send() once the buffer is full; let it settle before the next one.
    await Promise.race([reply.catch((error) => (failure = error)), new Promise((resolve) => setImmediate(resolve))]);
  }
  t.ok(failure instanceof MeshError, `a send failed after ${sent} frames`);
  t.equal((failure as MeshError).code, 'backpressure');
  t.match((failure as MeshError).message, /send buffer to z-peer is full/);
  t.ok(sent < 2_000, 'long before 2000 frames (128 MiB) were queued');
  t.same((await mesh.mesh.peers()).map((peer) => peer.server), ['z-peer'], 'the link stays up');
  ws.terminate();
  await Promise.all(pending);
});

t.test("a link counts only after the peer's hello: before it, the peer is neither listed nor sent envelopes", async (t) => {
  const mesh = await inProcessMesh('m-a');
  t.teardown(() => mesh.mesh.close(1000));
  const { ws } = await rawPeer(mesh, { greet: false });
  t.same(await mesh.mesh.peers(), [], 'not listed before its hello');
  await t.rejects(mesh.mesh.send({ method: 'mesh.echo', server: 'z-peer' }), { code: 'unavailable' }, 'mesh.send refuses it');
  t.notOk(mesh.events.some((entry) => entry.event === 'link:open'), 'no link:open yet');

  ws.send(JSON.stringify({ type: 'hello', publicUrl: 'http://z-peer.example.test', organizations: ['org-z'] }));
  await until(() => mesh.events.some((entry) => entry.event === 'link:open'), 'link:open once the hello arrived');
  t.same(await mesh.mesh.peers(), [{ server: 'z-peer', direction: 'in', publicUrl: 'http://z-peer.example.test', organizations: ['org-z'] }], 'listed with what its hello said');
  ws.close();
});
