import { gzipSync } from 'node:zlib';
import t from 'tap';
import { automationApp, postJson } from '../api/fixtures/app.js';

// Request bodies are taken as sent, never decompressed: a POST body labelled with any Content-Encoding other
// than identity is refused with 415 before anything reads it, so nothing is written.

const fixture = await automationApp();
t.teardown(() => fixture.close());
const { app, store, acme } = fixture;
const document = { name: 'encoded', baseUrl: 'https://items.example', endpoints: {} };
const create = { method: 'object.create', collection: 'apis', documents: [document] };

t.test('plain JSON labelled gzip is refused with 415 unsupported_encoding and writes nothing', async (t) => {
  const answer = await postJson(app, '/crud', create, { tenant: acme, headers: { 'content-encoding': 'gzip' } });
  t.equal(answer.statusCode, 415);
  t.same(answer.json(), { error: { code: 'unsupported_encoding', message: 'content-encoding gzip is not accepted: send the body uncompressed' } });
  t.equal(await store.collection('apis').countDocuments({ name: 'encoded' }), 0, 'nothing created');
});

t.test('a truly compressed body is refused the same way, whatever the coding, and so is a list of codings', async (t) => {
  const body = gzipSync(JSON.stringify(create));
  for (const coding of ['gzip', 'br', 'deflate', 'x-gzip', 'GZIP', 'identity, gzip', 'zstd']) {
    const answer = await app.inject({
      method: 'POST',
      url: '/crud',
      headers: { host: acme.host, authorization: `Bearer ${acme.adminKey}`, 'content-type': 'application/json', 'content-encoding': coding },
      payload: body,
    });
    t.equal(answer.statusCode, 415, coding);
    t.equal(answer.json().error.code, 'unsupported_encoding', coding);
  }
  t.equal(await store.collection('apis').countDocuments({ name: 'encoded' }), 0);
});

t.test('identity (or no Content-Encoding) is a body sent as it is', async (t) => {
  for (const headers of [{ 'content-encoding': 'identity' }, { 'content-encoding': 'Identity' }, {}] as Array<Record<string, string>>) {
    const answer = await postJson(app, '/crud', { method: 'object.read', collection: 'apis' }, { tenant: acme, headers });
    t.equal(answer.statusCode, 200, JSON.stringify(headers));
  }
});

t.test('the refusal comes before authorization: no key, a wrong key and another tenant get the same 415', async (t) => {
  for (const key of [null, 'fp_not_a_key', fixture.globex.adminKey]) {
    const answer = await postJson(app, '/crud', create, { tenant: acme, key, headers: { 'content-encoding': 'gzip' } });
    t.equal(answer.statusCode, 415);
    t.equal(answer.json().error.code, 'unsupported_encoding');
  }
});

t.test('every POST route documents the 415', async (t) => {
  const spec = (await app.inject({ method: 'GET', url: '/openapi.json', headers: { host: acme.host } })).json();
  const posts = Object.entries(spec.paths as Record<string, Record<string, { responses: Record<string, unknown> }>>).filter(([, item]) => item.post);
  t.ok(posts.length > 5);
  for (const [path, item] of posts) t.ok(JSON.stringify(item.post!.responses['415'] ?? '').includes('unsupported_encoding'), `POST ${path}`);
});
