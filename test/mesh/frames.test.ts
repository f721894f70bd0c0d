import t from 'tap';
import { randomUUID } from 'node:crypto';
import { parseFrame } from '../../src/mesh/frames.js';

const text = (value: unknown) => Buffer.from(typeof value === 'string' ? value : JSON.stringify(value));
const meta = { id: randomUUID(), origin: { server: 'srv-b', worker: 1 }, hops: 1 };

t.test('each frame type the mesh speaks is accepted', async (t) => {
  const frames = [
    { type: 'hello', publicUrl: 'https://b.example.test', organizations: ['o1'] },
    { type: 'org.active', organization_id: 'o1' },
    { type: 'mesh.orgDeleted', organization_id: 'o1' },
    { type: 'envelope', id: 3, envelope: { method: 'x', broadcast: true }, meta, timeoutMs: 500 },
    { type: 'envelope', envelope: { anything: 'goes to the router' }, meta, timeoutMs: 500 },
    { type: 'replies', id: 3, replies: [{ server: 'srv-b', worker: 1, ok: true, result: 1 }], missing: [{ server: 'srv-c' }] },
    { type: 'call', id: 4, method: 'mesh.echo', data: [1] },
    { type: 'result', id: 4, ok: false, error: { code: 'x', message: 'y' } },
    { type: 'error', code: 'bad_json', message: 'no' },
  ];
  for (const frame of frames) t.match(parseFrame(text(frame), false, 10_000), { ok: true, frame }, frame.type);
});

t.test('binary, oversized and non-JSON frames are refused with a code', async (t) => {
  t.match(parseFrame(text({ type: 'org.active', organization_id: 'o' }), true, 10_000), { ok: false, code: 'binary_frame' });
  t.match(parseFrame(text('x'.repeat(2_000)), false, 1_000), { ok: false, code: 'too_large', message: 'frame is 2000 bytes; the limit is 1000' });
  t.match(parseFrame(text('{"type":'), false, 1_000), { ok: false, code: 'bad_json' });
  t.match(parseFrame([text('{"type":"org.active",'), text('"organization_id":"o"}')], false, 1_000), { ok: true }, 'fragmented messages are joined');
});

t.test('invalid frames name the field that is wrong and keep the id for the error reply', async (t) => {
  t.match(parseFrame(text({ type: 'nope' }), false, 1_000), { ok: false, code: 'invalid_frame', message: 'unknown frame type "nope"' });
  t.match(parseFrame(text([1, 2]), false, 1_000), { ok: false, code: 'invalid_frame' });
  t.match(parseFrame(text(null), false, 1_000), { ok: false, code: 'invalid_frame' });
  t.match(parseFrame(text({ type: 'call', id: 9, method: 'status' }), false, 1_000), { ok: false, code: 'invalid_frame', id: 9, message: /^invalid call frame: method/ }, 'calls are mesh.* only');
  t.match(parseFrame(text({ type: 'envelope', id: 2, envelope: {}, meta: { ...meta, hops: 99 }, timeoutMs: 5 }), false, 10_000), { ok: false, id: 2, message: /meta\.hops/ }, 'hop count bounded');
  t.match(parseFrame(text({ type: 'envelope', id: 2, envelope: {}, meta, timeoutMs: 5, extra: 1 }), false, 10_000), { ok: false, message: /extra/ }, 'no unknown fields');
  t.match(parseFrame(text({ type: 'hello', organizations: [], publicUrl: 'javascript:alert(1)' }), false, 1_000), { ok: false, message: /publicUrl/ }, 'public URLs are http(s)');
  t.match(parseFrame(text({ type: 'call', id: -1, method: 'mesh.x' }), false, 1_000), { ok: false, id: undefined }, 'a bad id is not echoed');
  t.match(parseFrame(text({ type: '__proto__' }), false, 1_000), { ok: false, code: 'invalid_frame' });
});
