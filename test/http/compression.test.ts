import { gunzipSync, brotliDecompressSync } from 'node:zlib';
import t from 'tap';
import { habitsApp } from './fixtures/habits-app.js';

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
