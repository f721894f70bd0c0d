import t from 'tap';
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import type { FastifyInstance, LightMyRequestResponse } from 'fastify';
import WebSocket from 'ws';
import { generateKey } from '../../src/auth/keys.js';
import { createLogger } from '../../src/logging/logger.js';
import { FakeClock, settle } from '../helpers/fake-clock.js';
import { countingStore } from './fixtures/counting-store.js';
import { echoRoute, key, organization, testApp, testStore } from './fixtures/tenants.js';

const store = await testStore();
t.teardown(() => store.close());
const orgA = await organization(store, { name: 'Acme', hosts: ['a.example'] });
const adminA = await key(store, { organizationId: orgA._id, name: 'admin', admin: true });

const post = (app: FastifyInstance, remoteAddress: string, credential: string, headers: Record<string, string> = {}) =>
  app.inject({
    method: 'POST',
    url: '/test/envelope',
    remoteAddress,
    headers: { host: 'a.example', authorization: `Bearer ${credential}`, ...headers },
    payload: { method: 'object.read', collection: 'apis' },
  });

t.test('5,000 wrong keys from one address: 20 refused with 403, the rest with 429 and one store lookup; valid keys pass throughout', async (t) => {
  const counted = countingStore(store);
  const clock = new FakeClock(Date.now());
  const lines: string[] = [];
  const logger = createLogger({ level: 'info', destination: { write: (line: string) => void lines.push(line) } });
  // Default limits (20 failures, refilled over 10 s); the clock stands still, so none come back mid-burst, and
  // refusals are answered at once (delayMs: 0, refusalFloorMs: 0) so that the burst can be counted; holding them is
  // tested below.
  const { app } = await testApp(counted.store, { routes: echoRoute, authorizer: { clock, failureLimit: { delayMs: 0 }, refusalFloorMs: 0, log: logger.child({ component: 'authorize' }) } });
  t.teardown(() => app.close());

  t.equal((await post(app, '203.0.113.5', adminA)).statusCode, 200, 'before the burst');
  const first = [];
  for (let i = 0; i < 20; i++) first.push((await post(app, '203.0.113.5', generateKey().key)).statusCode);
  t.same(first, Array(20).fill(403), 'the first 20 wrong keys get the uniform 403');
  const lookups = counted.reads.keys;

  const statuses: Record<number, number> = {};
  const retryAfter = new Set<string | undefined>();
  const bodies = new Set<string>();
  const cacheControl = new Set<string | undefined>();
  const validDuring: number[] = [];
  for (let sent = 20; sent < 5_000; sent += 50) {
    const batch = Array.from({ length: Math.min(50, 5_000 - sent) }, () => post(app, '203.0.113.5', generateKey().key));
    // A legitimate client behind the same address, in the middle of the burst.
    const valid = post(app, '203.0.113.5', adminA);
    for (const reply of await Promise.all(batch)) {
      statuses[reply.statusCode] = (statuses[reply.statusCode] ?? 0) + 1;
      retryAfter.add(reply.headers['retry-after'] as string | undefined);
      bodies.add(reply.body);
      cacheControl.add(reply.headers['cache-control'] as string | undefined);
    }
    validDuring.push((await valid).statusCode);
  }
  t.same(statuses, { 429: 4_980 }, 'every later wrong key gets 429');
  // Each failure past the limit is charged (one more 500 ms to wait), down to -max: at most 21 × 500 ms away.
  const seconds = Array.from({ length: 11 }, (_, index) => String(index + 1));
  t.same([...retryAfter].sort((a, b) => Number(a) - Number(b)), seconds, 'with Retry-After: the seconds until one more attempt is allowed, 11 at most');
  t.same(
    new Set([...bodies].map((body) => JSON.stringify(JSON.parse(body)))),
    new Set(seconds.map((second) => JSON.stringify({ error: { code: 'too_many_requests', message: `too many failed authentications from this address: retry in ${second} s` } }))),
    'with the standard error body',
  );
  t.same([...cacheControl], ['no-store']);
  t.equal(counted.reads.keys, lookups + 1, 'one key lookup for all of the 4,980 (one per windowMs / max, and the clock stands still)');
  t.ok(validDuring.length === 100 && validDuring.every((status) => status === 200), 'a valid key from the same address got 200 all through the burst');
  t.equal((await post(app, '203.0.113.5', adminA)).statusCode, 200, 'and after it');
  t.equal((await post(app, '198.51.100.7', generateKey().key)).statusCode, 403, 'another address still gets the uniform 403');
  t.equal((await post(app, '198.51.100.7', adminA)).statusCode, 200);

  const denials = lines.filter((line) => line.includes('"msg":"authorization denied"'));
  t.ok(denials.length <= 50, `a bounded number of denial lines for 5,001 denials (${denials.length})`);
  clock.advance(10_000);
  t.ok(
    lines.some((line) => /"suppressed":\d+/.test(line) && line.includes('authorization denials')),
    'and a summary of how many were left out',
  );
  clock.advance(500);
  t.equal((await post(app, '203.0.113.5', generateKey().key)).statusCode, 403, 'quiet for the window and one refill, the address is checked again');
});

t.test('with the default delay, a 429 is answered after 500 ms; a valid key from the same address is not held', async (t) => {
  const clock = new FakeClock(Date.now());
  const { app } = await testApp(store, { routes: echoRoute, authorizer: { clock, failureLimit: { max: 1 }, refusalFloorMs: 0 } });
  t.teardown(() => app.close());
  t.equal((await post(app, '203.0.113.5', adminA)).statusCode, 200);
  t.equal((await post(app, '203.0.113.5', generateKey().key)).statusCode, 403);
  let answered: LightMyRequestResponse | undefined;
  const held = post(app, '203.0.113.5', generateKey().key).then((reply) => (answered = reply));
  // The request has reached authorization (and is held) once its 429 is waiting for the clock.
  while (clock.pending === 0) await settle();
  t.equal((await post(app, '203.0.113.5', adminA)).statusCode, 200, 'the valid key is answered meanwhile');
  t.equal(answered, undefined, 'the 429 is still held');
  clock.advance(500);
  await held;
  t.equal(answered!.statusCode, 429);
  t.equal(answered!.headers['retry-after'], '20', 'one failure per 10 s with max 1, and the refused one was charged');
});

t.test('X-Forwarded-For names the client only when the peer is a trusted proxy', async (t) => {
  const { app } = await testApp(store, { routes: echoRoute, authorizer: { trustedProxies: ['10.0.0.0/8'], failureLimit: { max: 3, windowMs: 60_000, delayMs: 0 } } });
  t.teardown(() => app.close());
  const wrong = () => generateKey().key;
  t.equal((await post(app, '10.0.0.1', adminA, { 'x-forwarded-for': '203.0.113.5' })).statusCode, 200, 'a client with a valid key');
  const statuses = async (count: number, remoteAddress: string, forwardedFor: string) => {
    const answered = [];
    for (let i = 0; i < count; i++) answered.push((await post(app, remoteAddress, wrong(), { 'x-forwarded-for': forwardedFor })).statusCode);
    return answered;
  };
  t.same(await statuses(4, '10.0.0.1', '203.0.113.5'), [403, 403, 403, 429], 'the forwarded client is limited');
  t.same(await statuses(1, '10.0.0.2', 'forged, 203.0.113.5'), [429], 'through any trusted proxy, whatever it was told further left');
  t.same(await statuses(1, '10.0.0.1', '198.51.100.7'), [403], 'another client behind the proxy is not limited');
  t.equal((await post(app, '10.0.0.1', adminA, { 'x-forwarded-for': '203.0.113.5' })).statusCode, 200, 'keeps passing once its address is limited');
  t.same(await statuses(4, '192.0.2.9', '198.51.100.50'), [403, 403, 403, 429], 'an untrusted peer is counted by its own address');
  t.same(await statuses(1, '192.0.2.9', '198.51.100.51'), [429], 'a spoofed X-Forwarded-For from it is ignored');
});

t.test('WebSocket: a frame past the limit is answered too_many_requests, and a valid key still works', async (t) => {
  const { app } = await testApp(store, { authorizer: { failureLimit: { max: 2, windowMs: 60_000, delayMs: 0 } } });
  t.teardown(() => app.close());
  await app.listen({ port: 0, host: '127.0.0.1' });
  const { port } = app.server.address() as AddressInfo;
  const socket = new WebSocket(`ws://127.0.0.1:${port}/ws`, { headers: { host: 'a.example' }, perMessageDeflate: false });
  t.teardown(() => socket.terminate());
  const frames: Array<Record<string, unknown>> = [];
  socket.on('message', (data) => frames.push(JSON.parse(String(data))));
  await once(socket, 'open');
  const answer = async (envelope: object) => {
    const seen = frames.length;
    socket.send(JSON.stringify(envelope));
    while (frames.length === seen) await once(socket, 'message');
    return frames[seen];
  };
  const read = { method: 'object.read', collection: 'apis' };
  t.match(await answer({ requestId: 0, ...read, apikey: adminA }), { id: 0, ok: true }, 'a valid key');
  t.match(await answer({ requestId: 1, ...read, apikey: generateKey().key }), { id: 1, ok: false, error: { code: 'forbidden' } });
  t.match(await answer({ requestId: 2, ...read, apikey: generateKey().key }), { id: 2, ok: false, error: { code: 'forbidden' } });
  t.match(
    await answer({ requestId: 3, ...read, apikey: generateKey().key }),
    { id: 3, ok: false, error: { code: 'too_many_requests', message: 'too many failed authentications from this address: retry in 60 s' } },
    'past the limit',
  );
  t.match(await answer({ requestId: 4, ...read, apikey: adminA }), { id: 4, ok: true }, 'the valid key still works over the same socket');
});
