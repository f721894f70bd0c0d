import type { AddressInfo } from 'node:net';
import t, { type Test } from 'tap';
import { automationApp } from '../api/fixtures/app.js';
import { rawRequest, requestText, type RawAnswer } from './fixtures/raw-http.js';

const fixture = await automationApp();
t.teardown(() => fixture.close());
const { app, acme } = fixture;
await app.listen({ port: 0, host: '127.0.0.1' });
const { port } = app.server.address() as AddressInfo;
const tenantHeaders = [`Host: ${acme.host}`, `Authorization: Bearer ${acme.adminKey}`];

/** The one error contract: the status, `{ error: { code, message } }` and nothing else, JSON, `no-store`. */
function assertError(t: Test, answer: RawAnswer, status: number, code: string) {
  t.equal(answer.status, status, 'status');
  t.match(answer.headers['content-type'], /^application\/json/, 'content-type');
  t.equal(answer.headers['cache-control'], 'no-store', 'cache-control');
  const body = JSON.parse(answer.body) as { error: { code: string; message: string } };
  t.same(Object.keys(body), ['error'], 'only the error');
  t.same(Object.keys(body.error).sort(), ['code', 'message']);
  t.equal(body.error.code, code, 'code');
  t.type(body.error.message, 'string');
  t.ok(body.error.message.length > 0, 'a message');
  return body.error;
}

t.test("a request Node's parser cannot read → 400, and the connection closes", async (t) => {
  for (const garbage of ['GARBAGE\r\n\r\n', 'GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n', 'GET / HTTP/1.1\r\nBad Header\r\n\r\n']) {
    const answer = await rawRequest(port, garbage);
    assertError(t, answer, 400, 'bad_request');
    t.equal(answer.headers.connection, 'close');
    t.ok(answer.closed, `closed after ${JSON.stringify(garbage.slice(0, 20))}`);
  }
});

t.test('headers over the size limit → 431', async (t) => {
  const answer = await rawRequest(port, requestText('GET', '/healthz', [...tenantHeaders, `X-Padding: ${'a'.repeat(20_000)}`]));
  assertError(t, answer, 431, 'headers_too_large');
  t.ok(answer.closed);
});

t.test("a request line over the size limit → 431 too: Node's parser counts it with the headers", async (t) => {
  const answer = await rawRequest(port, requestText('GET', `/healthz?${'q'.repeat(20_000)}`, tenantHeaders));
  assertError(t, answer, 431, 'headers_too_large');
  t.ok(answer.closed);
});

t.test('a path parameter over the router’s length limit → 414', async (t) => {
  const answer = await rawRequest(port, requestText('POST', `/workflows/${'w'.repeat(101)}`, [...tenantHeaders, 'Content-Type: application/json'], '{}'), { keepOpen: true });
  const error = assertError(t, answer, 414, 'uri_too_long');
  t.notMatch(error.message, /www/, 'the path is not echoed');
});

t.test('a path that is not valid percent-encoding → 400', async (t) => {
  const answer = await rawRequest(port, requestText('POST', '/workflows/%zz', [...tenantHeaders, 'Content-Type: application/json'], '{}'), { keepOpen: true });
  assertError(t, answer, 400, 'bad_request');
});

t.test('no route → 404', async (t) => {
  assertError(t, await rawRequest(port, requestText('GET', '/nowhere', tenantHeaders), { keepOpen: true }), 404, 'not_found');
  assertError(t, await rawRequest(port, requestText('POST', '/apis', [...tenantHeaders, 'Content-Type: application/json'], '{}'), { keepOpen: true }), 404, 'not_found');
  assertError(t, await rawRequest(port, requestText('PUT', '/nowhere', [...tenantHeaders, 'Content-Type: text/plain'], 'x'), { keepOpen: true }), 404, 'not_found');
});

t.test('an upgrade request answered over HTTP gets the error and its connection closed', async (t) => {
  // After 'upgrade' the HTTP server no longer times the socket out: left open, it would be held forever.
  const upgrade = [`Host: ${acme.host}`, 'Connection: Upgrade', 'Upgrade: websocket', 'Sec-WebSocket-Version: 13', 'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ=='];
  for (const [path, status, code] of [['/nowhere', 404, 'not_found'], ['/control', 405, 'method_not_allowed'], ['/workflows/%zz', 400, 'bad_request']] as const) {
    const answer = await rawRequest(port, requestText('GET', path, upgrade));
    assertError(t, answer, status, code);
    t.ok(answer.closed, `${path}: closed`);
  }
  const probe = await rawRequest(port, requestText('GET', '/healthz', upgrade));
  t.equal(probe.status, 200, 'a success too');
  t.ok(probe.closed);
});

t.test('another method on an envelope route → 405 with Allow: POST', async (t) => {
  // Whatever the body: the method is what is wrong.
  for (const [method, headers] of [['GET', []], ['PUT', []], ['PATCH', ['Content-Type: text/plain']], ['DELETE', ['Content-Type: application/json']]] as const) {
    const answer = await rawRequest(port, requestText(method, '/control', [...tenantHeaders, ...headers], method === 'GET' ? undefined : '{}'), { keepOpen: true });
    assertError(t, answer, 405, 'method_not_allowed');
    t.equal(answer.headers.allow, 'POST');
  }
});

t.test('a body over 1 MiB → 413', async (t) => {
  // The server answers from Content-Length alone, before the body arrives.
  const head = `POST /control HTTP/1.1\r\n${tenantHeaders.join('\r\n')}\r\nContent-Type: application/json\r\nContent-Length: ${1024 * 1024 + 1}\r\n\r\n{"method":"status",`;
  const answer = await rawRequest(port, head);
  assertError(t, answer, 413, 'payload_too_large');
  t.ok(answer.closed, 'the rest of the body is not read');
  t.same(fixture.requests, [], 'nothing was sent anywhere');
});

t.test('a body that is not application/json → 415', async (t) => {
  const answer = await rawRequest(port, requestText('POST', '/control', [...tenantHeaders, 'Content-Type: text/plain'], '{"method":"status"}'), { keepOpen: true });
  assertError(t, answer, 415, 'unsupported_media_type');
});

t.test('a body that is not JSON → 400', async (t) => {
  for (const body of ['{"method":', '{"__proto__":{"admin":true},"method":"status"}']) {
    const answer = await rawRequest(port, requestText('POST', '/control', [...tenantHeaders, 'Content-Type: application/json'], body), { keepOpen: true });
    assertError(t, answer, 400, 'bad_request');
  }
  t.same(fixture.requests, [], 'nothing was sent anywhere');
});
