import t from 'tap';
import { key } from '../auth/fixtures/tenants.js';
import { automationApp, postJson } from './fixtures/app.js';
import { BIG_REPLY_BYTES, itemsProvider, startUpstream } from './fixtures/upstream.js';

const upstream = await startUpstream();
const fixture = await automationApp();
t.teardown(async () => {
  await fixture.close();
  await upstream.close();
});
const { app, store, acme, globex } = fixture;
await store.forOrganization(acme.organization_id).collection('apis').insertOne(itemsProvider(upstream));
await store.forOrganization(acme.organization_id).collection('apis').insertOne(itemsProvider(upstream, { name: 'hasty', timeoutMs: 200 }));

const call = (body: unknown, options: { key?: string | null; url?: string } = {}) => postJson(app, options.url ?? '/api', body, { tenant: acme, key: options.key });

t.test('a call with a path parameter reaches the provider and answers { status, data }', async (t) => {
  const before = upstream.hits.length;
  const reply = await call({ api: 'items', endpoint: 'create', method: 'post', data: { id: 'a b', title: 'hi' } });
  t.equal(reply.statusCode, 200);
  t.same(reply.json(), { status: 201, data: { id: 'a b', title: 'hi' } });
  const hit = upstream.hits[before]!;
  t.equal(hit.method, 'POST');
  t.equal(hit.url, '/items/a%20b', 'the parameter is encoded into its own segment');
  t.same(JSON.parse(hit.body), { title: 'hi' }, 'the rest of data is the JSON body');
  t.equal(hit.headers['x-api-token'], 'upstream-token-123', 'secret headers are sent upstream');
  t.equal(hit.headers['x-team'], 'blue');
  t.equal(hit.headers.authorization, undefined, "the caller's key never goes upstream");
  t.equal(reply.headers['cache-control'], 'no-store');
});

t.test('GET endpoints take the rest of data as the query; /api/<api>/<endpoint> names them in the path', async (t) => {
  const reply = await call({ method: 'get', data: { q: 'x y', tag: ['a', 'b'] } }, { url: '/api/items/list' });
  t.equal(reply.statusCode, 200);
  t.same(reply.json(), { status: 200, data: { query: { q: 'x y', tag: 'b' } } });
  t.equal(upstream.hits.at(-1)!.url, '/items?q=x+y&tag=a&tag=b');
  const conflict = await call({ api: 'other', method: 'get' }, { url: '/api/items/list' });
  t.equal(conflict.statusCode, 400);
  t.match(conflict.json().error.message, /^api: /);
});

t.test('upstream 500 → 502 naming the upstream status; 404 passes through; text stays text', async (t) => {
  const failed = await call({ api: 'items', endpoint: 'fail', method: 'post' });
  t.equal(failed.statusCode, 502);
  t.same(failed.json(), { error: { code: 'upstream_failed', message: 'provider "items" answered 500', upstreamStatus: 500 } });
  t.notMatch(failed.body, /exploded/, "the upstream's error body is not relayed");
  const missing = await call({ api: 'items', endpoint: 'missing', method: 'get' });
  t.equal(missing.statusCode, 200);
  t.same(missing.json(), { status: 404, data: { error: 'no such item' } });
  t.same((await call({ api: 'items', endpoint: 'text', method: 'get' })).json(), { status: 200, data: 'plain words' });
});

t.test('a slow upstream → 504 after the provider timeoutMs', async (t) => {
  const reply = await call({ api: 'hasty', endpoint: 'slow', method: 'get' });
  t.equal(reply.statusCode, 504);
  t.equal(reply.json().error.code, 'upstream_timeout');
  t.match(reply.json().error.message, /did not answer within 200 ms/);
});

t.test('an oversized upstream reply → 502 and is not relayed', async (t) => {
  const reply = await call({ api: 'items', endpoint: 'big', method: 'get' });
  t.equal(reply.statusCode, 502);
  t.equal(reply.json().error.code, 'upstream_too_large');
  t.ok(reply.body.length < BIG_REPLY_BYTES / 100);
});

t.test('path parameters that could leave the endpoint and a url field → 400; the upstream is never contacted', async (t) => {
  const before = upstream.hits.length;
  const hostile: Array<[string, unknown]> = [
    ['dot-dot', '../admin'],
    ['dot-dot alone', '..'],
    ['encoded-looking slash', 'a/b'],
    ['backslash', 'a\\b'],
    ['CR LF', 'x\r\nHost: evil'],
    ['LF', 'x\ny'],
    ['full URL', 'http://evil.example/x'],
    ['scheme-relative', '//evil.example/x'],
    ['object', { toString: 'x' }],
    ['empty', ''],
  ];
  for (const [label, id] of hostile) {
    const reply = await call({ api: 'items', endpoint: 'create', method: 'post', data: { id } });
    t.equal(reply.statusCode, 400, label);
    t.match(reply.json().error.message, /^data\.id: /, `${label}: names the parameter`);
  }
  const missing = await call({ api: 'items', endpoint: 'create', method: 'post', data: {} });
  t.equal(missing.statusCode, 400, 'a missing path parameter');
  const url = await call({ api: 'items', endpoint: 'create', method: 'post', url: 'http://evil.example/', data: { id: '1' } });
  t.equal(url.statusCode, 400);
  t.equal(url.json().error.code, 'url_not_supported');
  const onlyUrl = await call({ method: 'get', url: `${upstream.baseUrl}/items` });
  t.equal(onlyUrl.statusCode, 400);
  t.equal(upstream.hits.length, before, 'no request reached the upstream');
});

t.test('envelope mistakes are 400 or 404 naming the problem, before any upstream call', async (t) => {
  const before = upstream.hits.length;
  const cases: Array<[unknown, number, RegExp]> = [
    [{ api: 'items', endpoint: 'create', method: 'get', data: { id: '1' } }, 400, /^method: endpoint "create" of api "items" is "post"/],
    [{ api: 'items', endpoint: 'create', method: 'POST', data: { id: '1' } }, 400, /^method/],
    [{ api: 'items', method: 'post' }, 400, /^endpoint: is required/],
    [{ api: 'items', endpoint: 'create', method: 'post', data: 'x' }, 400, /^data: must be an object/],
    [{ api: 'items', endpoint: 'nope', method: 'post' }, 404, /no endpoint "nope"/],
    [{ api: 'nope', endpoint: 'create', method: 'post' }, 404, /no api "nope"/],
    [{ api: 'items', endpoint: 'create', method: 'post', extra: 1 }, 400, /^extra: unknown field/],
  ];
  for (const [body, status, message] of cases) {
    const reply = await call(body);
    t.equal(reply.statusCode, status, JSON.stringify(body));
    t.match(reply.json().error.message, message);
  }
  t.equal(upstream.hits.length, before);
});

t.test("authorization is on the envelope's own HTTP method with api/endpoint restrictions; tenants are separate", async (t) => {
  const creator = await key(store, { organizationId: acme.organization_id, name: 'creator', permissions: { post: { api: ['items'], endpoint: ['create'] } } });
  t.equal((await call({ api: 'items', endpoint: 'create', method: 'post', data: { id: '1' } }, { key: creator })).statusCode, 200);
  t.equal((await call({ api: 'items', endpoint: 'fail', method: 'post' }, { key: creator })).statusCode, 403, 'another endpoint');
  t.equal((await call({ api: 'items', endpoint: 'list', method: 'get' }, { key: creator })).statusCode, 403, 'another verb');
  t.equal((await call({ api: 'items', endpoint: 'create', method: 'post', data: { id: '1' } }, { key: null })).statusCode, 403, 'no key');
  const other = await postJson(app, '/api', { api: 'items', endpoint: 'create', method: 'post', data: { id: '1' } }, { tenant: globex });
  t.equal(other.statusCode, 404, "another organization's provider does not exist for globex");
});

t.test('server.api.send is the same path without HTTP', async (t) => {
  const reply = await fixture.automation.api.send({ organization_id: acme.organization_id, api: 'items', endpoint: 'create', method: 'post', data: { id: '7', n: 1 } });
  t.same(reply, { status: 201, data: { id: '7', n: 1 } });
  await t.rejects(fixture.automation.api.send({ organization_id: acme.organization_id, api: 'items', endpoint: 'create', method: 'post', url: 'http://x/' }), { code: 'invalid_envelope', statusCode: 400 });
});

t.test('provider header secrets never reach the logs', async (t) => {
  await call({ api: 'items', endpoint: 'fail', method: 'post' });
  const text = fixture.logs.join('');
  t.match(text, /api call failed/);
  t.notMatch(text, /upstream-token-123/);
});
