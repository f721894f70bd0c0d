import { gunzipSync, brotliDecompressSync } from 'node:zlib';
import t from 'tap';
import { habitsApp } from './fixtures/habits-app.js';
import { skipSmallReplies } from '../../plugins/http-habits.js';

t.test('a large reply (openapi.json) is compressed as the client accepts, and decompresses to the same document', async (t) => {
  const fixture = await habitsApp();
  t.teardown(fixture.close);
  const plain = await fixture.app.inject({ method: 'GET', url: '/openapi.json', headers: { host: 'acme.test' } });
  t.equal(plain.statusCode, 200);
  t.notOk(plain.headers['content-encoding'], 'without Accept-Encoding the document goes as it is');
  t.ok(plain.rawPayload.length > 1024, `the document is large (${plain.rawPayload.length} bytes)`);

  const gzip = await fixture.app.inject({ method: 'GET', url: '/openapi.json', headers: { host: 'acme.test', 'accept-encoding': 'gzip' } });
  t.equal(gzip.headers['content-encoding'], 'gzip');
  t.match(gzip.headers.vary, /accept-encoding/i);
  t.ok(gzip.rawPayload.length < plain.rawPayload.length / 3, `gzip: ${plain.rawPayload.length} → ${gzip.rawPayload.length} bytes`);
  t.same(JSON.parse(gunzipSync(gzip.rawPayload).toString()), plain.json());

  const br = await fixture.app.inject({ method: 'GET', url: '/openapi.json', headers: { host: 'acme.test', 'accept-encoding': 'gzip, deflate, br' } });
  t.equal(br.headers['content-encoding'], 'br', 'br is preferred when offered');
  t.same(JSON.parse(brotliDecompressSync(br.rawPayload).toString()), plain.json());
});

t.test('a small envelope reply is sent untouched even when the client accepts compression', async (t) => {
  const fixture = await habitsApp();
  t.teardown(fixture.close);
  const answer = await fixture.app.inject({
    method: 'POST',
    url: '/test/envelope',
    headers: { host: 'acme.test', authorization: `Bearer ${fixture.acme.key}`, 'content-type': 'application/json', 'accept-encoding': 'gzip, br' },
    payload: { method: 'status' },
  });
  t.equal(answer.statusCode, 200);
  t.notOk(answer.headers['content-encoding']);
  t.equal(answer.headers['content-length'], String(answer.rawPayload.length));
  t.same(answer.json(), { organization: fixture.acme.id, ip: '127.0.0.1' });
});

t.test('the threshold is configurable, and compression can be turned off', async (t) => {
  const low = await habitsApp({ http: { compression: { thresholdBytes: 10 } } });
  t.teardown(low.close);
  const small = await low.app.inject({ method: 'GET', url: '/healthz', headers: { host: 'acme.test', 'accept-encoding': 'gzip' } });
  t.equal(small.headers['content-encoding'], 'gzip', 'a reply above a 10-byte threshold is compressed');
  t.match(JSON.parse(gunzipSync(small.rawPayload).toString()), { status: 'ready' });

  const off = await habitsApp({ http: { compression: { enabled: false } } });
  t.teardown(off.close);
  const large = await off.app.inject({ method: 'GET', url: '/openapi.json', headers: { host: 'acme.test', 'accept-encoding': 'gzip, br' } });
  t.equal(large.statusCode, 200);
  t.notOk(large.headers['content-encoding']);
});

t.test('a route\'s compression hook is reached only by replies that may be compressed', async (t) => {
  const reached: unknown[] = [];
  const other = (_request: unknown, _reply: unknown, payload: unknown, done: (error: null, payload: unknown) => void) => done(null, payload);
  const onSend = (_request: unknown, _reply: unknown, payload: unknown, done: (error: null, payload: unknown) => void) => {
    reached.push(payload);
    done(null, 'compressed');
  };
  const route = { onSend: [other, onSend] };
  skipSmallReplies(route, 1024);
  t.equal(route.onSend[0], other, 'the route\'s own hooks stay as they are');
  const send = (payload: unknown) =>
    new Promise((resolve) => (route.onSend[1] as typeof onSend).call({}, {}, {}, payload, (_error, sent) => resolve(sent)));

  t.equal(await send('x'.repeat(1023)), 'x'.repeat(1023), 'a text reply under the threshold goes as it came');
  t.equal(await send('é'.repeat(512)), 'compressed', 'the threshold counts bytes, not characters');
  t.equal(await send('x'.repeat(1024)), 'compressed', 'a reply at the threshold reaches the hook');
  const buffer = Buffer.from('small');
  t.equal(await send(buffer), 'compressed', 'buffers and streams reach the hook, which decides for them');
  t.same(reached, ['é'.repeat(512), 'x'.repeat(1024), buffer]);

  const without = { onSend: [other] };
  skipSmallReplies(without, 1024);
  t.same(without.onSend, [other], 'a route without the compression hook is left alone');
});

t.test('every route\'s compression hook is behind the size check, and large replies are still compressed', async (t) => {
  const fixture = await habitsApp();
  t.teardown(fixture.close);
  const answer = await fixture.app.inject({ method: 'GET', url: '/openapi.json', headers: { host: 'acme.test', 'accept-encoding': 'gzip' } });
  t.equal(answer.headers['content-encoding'], 'gzip');
  const onSendLines = fixture.app.printRoutes({ includeHooks: true, commonPrefix: false }).split('\n').filter((line) => line.includes('(onSend)'));
  t.ok(onSendLines.length > 10, `routes with onSend hooks: ${onSendLines.length}`);
  t.notOk(onSendLines.some((line) => line.includes('"onSend()"')), 'no route keeps the compression hook unguarded');
  t.ok(onSendLines.every((line) => line.includes('compressLargeReplies()')));
});
