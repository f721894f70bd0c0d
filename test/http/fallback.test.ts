import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import t, { type Test } from 'tap';
import { FallbackResponder } from '../../src/runtime/fallback.js';
import { rawRequest, requestText, type RawAnswer } from './fixtures/raw-http.js';

/** The primary's own answers, listening directly (in production the primary hands it accepted sockets). */
async function responder(redirect?: string) {
  const reached: string[] = [];
  const fallbackRoutes = (request: IncomingMessage, response: ServerResponse) => {
    if (request.url !== '/control') return false;
    reached.push(request.url);
    response.end('{}');
    return true;
  };
  const fallback = new FallbackResponder({ serverId: 'server-1', redirect, retryAfterS: 5, status: () => 'fallback' });
  fallback.serveAlso({ fallbackRoutes });
  await new Promise<void>((resolve) => fallback.http.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise<void>((resolve) => fallback.http.close(() => resolve())));
  return { port: (fallback.http.address() as AddressInfo).port, reached };
}

function assertError(t: Test, answer: RawAnswer, status: number, code: string) {
  t.equal(answer.status, status);
  t.equal(answer.headers['cache-control'], 'no-store');
  t.match(answer.headers['content-type'], /^application\/json/);
  t.match(JSON.parse(answer.body), { error: { code, message: String } });
  t.same(Object.keys(JSON.parse(answer.body).error).sort(), ['code', 'message']);
  t.ok(answer.closed);
}

t.test('the fallback answers unreadable requests in the one error shape', async (t) => {
  const { port } = await responder();
  assertError(t, await rawRequest(port, 'GARBAGE\r\n\r\n'), 400, 'bad_request');
  assertError(t, await rawRequest(port, requestText('GET', '/healthz', ['Host: a', `X-Padding: ${'a'.repeat(20_000)}`])), 431, 'headers_too_large');
});

t.test('the fallback refuses duplicate Host and Authorization headers; the primary’s own routes are not reached', async (t) => {
  const { port, reached } = await responder('https://lb.example');
  assertError(t, await rawRequest(port, requestText('GET', '/healthz', ['Host: a', 'Host: b'])), 400, 'duplicate_header');
  const refused = await rawRequest(port, requestText('POST', '/control', ['Host: a', 'Authorization: Bearer x', 'authorization: Bearer y', 'Content-Type: application/json'], '{}'));
  assertError(t, refused, 400, 'duplicate_header');
  t.match(JSON.parse(refused.body).error.message, 'Authorization');
  t.same(reached, []);
  const passed = await rawRequest(port, requestText('POST', '/control', ['Host: a', 'Authorization: Bearer x', 'Content-Type: application/json'], '{}'));
  t.same(reached, ['/control'], 'with one of each, the route is reached');
  t.equal(passed.status, 200);
});

t.test('the fallback’s own answers are unchanged: 503 in the error shape, the 307 without a body', async (t) => {
  const none = await responder();
  const unavailable = await rawRequest(none.port, requestText('GET', '/x', ['Host: a']));
  assertError(t, unavailable, 503, 'unavailable');
  t.equal(unavailable.headers['retry-after'], '5');
  const redirecting = await responder('https://lb.example');
  const moved = await rawRequest(redirecting.port, requestText('GET', '/x?y=1', ['Host: a']));
  t.equal(moved.status, 307);
  t.equal(moved.headers.location, 'https://lb.example/x?y=1');
  t.equal(moved.headers['cache-control'], 'no-store');
  t.equal(moved.body, '');
});
