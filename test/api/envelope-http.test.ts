import fc from 'fast-check';
import t from 'tap';
import type { LightMyRequestResponse } from 'fastify';
import { automationApp } from './fixtures/app.js';

const fixture = await automationApp();
t.teardown(() => fixture.close());
const { app, acme } = fixture;
const ENVELOPE_ROUTES = ['/api', '/api/items/create', '/workflows/echo', '/webhooks/github', '/crud', '/control'];
const replies: Array<[string, LightMyRequestResponse]> = [];

async function send(method: string, url: string, payload?: string | Buffer, contentType: string | null = 'application/json') {
  const headers: Record<string, string> = { host: acme.host, authorization: `Bearer ${acme.adminKey}` };
  if (contentType) headers['content-type'] = contentType;
  const reply = await app.inject({ method: method as 'POST', url, headers, payload });
  replies.push([`${method} ${url}`, reply]);
  return reply;
}

t.test('other methods → 405 with Allow: POST', async (t) => {
  for (const url of ENVELOPE_ROUTES) {
    for (const method of ['GET', 'PUT', 'PATCH', 'DELETE']) {
      const reply = await send(method, url, method === 'GET' ? undefined : '{}');
      t.equal(reply.statusCode, 405, `${method} ${url}`);
      t.equal(reply.headers.allow, 'POST');
      t.equal(reply.json().error.code, 'method_not_allowed');
    }
    t.equal((await send('HEAD', url)).statusCode, 405, `HEAD ${url}`);
  }
});

t.test('anything but application/json → 415', async (t) => {
  for (const url of ENVELOPE_ROUTES) {
    for (const type of ['text/plain', 'application/x-www-form-urlencoded', 'application/jsonp', null]) {
      const reply = await send('POST', url, '{"method":"status"}', type);
      t.equal(reply.statusCode, 415, `${type} ${url}`);
      t.same(reply.json(), { error: { code: 'unsupported_media_type', message: 'content-type must be application/json' } });
    }
    t.not((await send('POST', url, '{}', 'application/json; charset=utf-8')).statusCode, 415, 'a charset parameter is fine');
  }
});

t.test('bodies over 1 MiB → 413', async (t) => {
  const exactlyOver = `{"pad":"${'x'.repeat(1024 * 1024 + 1 - 10)}"}`;
  t.equal(Buffer.byteLength(exactlyOver), 1024 * 1024 + 1);
  for (const url of ENVELOPE_ROUTES) {
    const reply = await send('POST', url, exactlyOver);
    t.equal(reply.statusCode, 413, url);
    t.equal(reply.json().error.code, 'payload_too_large');
  }
});

t.test('invalid JSON and prototype poisoning → 400', async (t) => {
  const bodies = ['{"method":', '', '{"__proto__":{"admin":true},"method":"status"}', '{"constructor":{"prototype":{"admin":true}},"method":"status"}'];
  for (const url of ENVELOPE_ROUTES) {
    for (const body of bodies) {
      const reply = await send('POST', url, body);
      // A webhook answers 404 first: the unknown sender learns nothing about parsing.
      t.equal(reply.statusCode, url.startsWith('/webhooks') ? 404 : 400, `${url} ${body.slice(0, 20)}`);
    }
  }
  t.equal(({} as Record<string, unknown>).admin, undefined);
});

t.test('prefixes respect path-segment boundaries', async (t) => {
  for (const url of ['/apis', '/api-x', '/apix/items', '/managerial', '/workflowsx', '/workflowsx/echo', '/webhooksx/github', '/crudx', '/controls']) {
    const reply = await send('POST', url, '{}');
    t.equal(reply.statusCode, 404, url);
    t.equal(reply.json().error.message, `no route for POST ${url}`, `${url} reached no handler`);
  }
  t.not((await send('POST', '/api', '{}')).statusCode, 404, '/api is routed');
  t.not((await send('POST', '/api/items', '{}')).statusCode, 404, '/api/... is routed');
});

t.test('every envelope reply, success or error, is Cache-Control: no-store', async (t) => {
  t.not((await send('POST', '/workflows/nope', '{"nope":[]}')).statusCode, 200);
  t.ok(replies.length > 100);
  for (const [what, reply] of replies) {
    if (reply.statusCode === 404 && !ENVELOPE_ROUTES.some((route) => what.endsWith(route))) continue;
    t.equal(reply.headers['cache-control'], 'no-store', `${what} → ${reply.statusCode}`);
  }
});

t.test('no body sent to an envelope route answers 500', async (t) => {
  const json = fc.jsonValue({ maxDepth: 4 }).map((value) => JSON.stringify(value));
  const envelopeLike = fc
    .record({ method: fc.oneof(fc.constantFrom('post', 'get', 'workflow.echo', 'object.read', 'object.create', 'status'), fc.string()), api: fc.string(), endpoint: fc.string(), collection: fc.string(), data: fc.jsonValue({ maxDepth: 3 }), echo: fc.array(fc.jsonValue({ maxDepth: 2 })), filter: fc.dictionary(fc.string(), fc.jsonValue({ maxDepth: 2 })) }, { requiredKeys: [] })
    .map((value) => JSON.stringify(value));
  await fc.assert(
    fc.asyncProperty(fc.constantFrom(...ENVELOPE_ROUTES), fc.oneof(json, envelopeLike), async (url, body) => {
      const reply = await send('POST', url, body);
      return reply.statusCode < 500;
    }),
    { numRuns: 300 },
  );
  t.pass('every reply was a 4xx or a success');
});
