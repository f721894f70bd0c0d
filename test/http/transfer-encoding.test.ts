import type { AddressInfo } from 'node:net';
import { gzipSync } from 'node:zlib';
import t, { type Test } from 'tap';
import { unsupportedTransferEncoding } from '../../src/http/transfer-encoding.js';
import { automationApp } from '../api/fixtures/app.js';
import { rawRequest, type RawAnswer } from './fixtures/raw-http.js';

// A request body is framed by `Transfer-Encoding: chunked` alone or by `Content-Length`. Node's parser de-chunks
// a body whose last coding is chunked and passes the others by, so `gzip, chunked` would reach the route still
// compressed: any other transfer coding is refused (501) before a route or authorization sees the request.

const fixture = await automationApp();
t.teardown(() => fixture.close());
const { app, acme } = fixture;
await app.listen({ port: 0, host: '127.0.0.1' });
const { port } = app.server.address() as AddressInfo;
const STATUS = JSON.stringify({ method: 'status', master: true });

/** A `POST /control` with `Transfer-Encoding` header lines `codings` (one line each) and `body` in one chunk. */
function chunkedPost(codings: string[], body: string | Buffer, path = '/control'): Buffer {
  const head = [`POST ${path} HTTP/1.1`, `Host: ${acme.host}`, `Authorization: Bearer ${acme.adminKey}`, 'Content-Type: application/json', ...codings.map((coding) => `Transfer-Encoding: ${coding}`)];
  const payload = Buffer.from(body);
  return Buffer.concat([Buffer.from(`${head.join('\r\n')}\r\n\r\n${payload.length.toString(16)}\r\n`), payload, Buffer.from('\r\n0\r\n\r\n')]);
}

function assertRefused(t: Test, answer: RawAnswer, what: string) {
  t.equal(answer.status, 501, what);
  t.equal(answer.headers['cache-control'], 'no-store');
  const body = JSON.parse(answer.body);
  t.same(Object.keys(body.error).sort(), ['code', 'message']);
  t.equal(body.error.code, 'unsupported_transfer_encoding');
  t.ok(answer.closed, 'the connection is closed');
}

t.test('chunked alone, in any letter case, frames the body as usual', async (t) => {
  for (const coding of ['chunked', 'Chunked']) {
    const answer = await rawRequest(port, chunkedPost([coding], STATUS), { keepOpen: true });
    t.equal(answer.status, 200, coding);
    t.same(JSON.parse(answer.body).replies.length, 1);
  }
  t.equal(fixture.requests.length, 2, 'both envelopes were sent');
  fixture.requests.length = 0;
});

t.test('gzip, chunked → 501 unsupported_transfer_encoding before authorization; no envelope runs', async (t) => {
  const answer = await rawRequest(port, chunkedPost(['gzip, chunked'], gzipSync(STATUS)));
  assertRefused(t, answer, 'gzip, chunked');
  t.equal(JSON.parse(answer.body).error.message, 'transfer-encoding gzip, chunked is not supported: send the body with chunked alone or a Content-Length');
  for (const codings of [['deflate, chunked'], ['identity, chunked'], ['GZIP, Chunked'], ['gzip', 'chunked']]) {
    assertRefused(t, await rawRequest(port, chunkedPost(codings, STATUS)), codings.join(' + '));
  }
  assertRefused(t, await rawRequest(port, chunkedPost(['gzip, chunked'], STATUS, '/workflows/none')), 'on another envelope route');
  t.same(fixture.requests, [], 'no envelope was sent');
});

t.test('codings Node itself cannot frame are refused too', async (t) => {
  // Node's parser refuses chunked twice outright (400); identity alone reaches the guard first.
  const twice = await rawRequest(port, chunkedPost(['chunked, chunked'], STATUS));
  t.equal(twice.status, 400);
  t.equal(JSON.parse(twice.body).error.code, 'bad_request');
  assertRefused(t, await rawRequest(port, `GET /healthz HTTP/1.1\r\nHost: ${acme.host}\r\nTransfer-Encoding: identity\r\n\r\n`), 'identity');
  t.same(fixture.requests, []);
});

t.test('every route documents the 501', async (t) => {
  const spec = (await app.inject({ method: 'GET', url: '/openapi.json', headers: { host: acme.host } })).json();
  const operations = Object.entries(spec.paths as Record<string, Record<string, { responses: Record<string, unknown> }>>).flatMap(([path, item]) => Object.entries(item).map(([method, operation]) => [`${method} ${path}`, operation] as const));
  t.ok(operations.length > 10);
  for (const [name, operation] of operations) t.ok(JSON.stringify(operation.responses['501'] ?? '').includes('unsupported_transfer_encoding'), name);
});

t.test('unsupportedTransferEncoding passes chunked alone and no header, and names anything else', async (t) => {
  t.equal(unsupportedTransferEncoding(undefined), undefined);
  t.equal(unsupportedTransferEncoding('chunked'), undefined);
  t.equal(unsupportedTransferEncoding('CHUNKED'), undefined);
  for (const header of ['gzip, chunked', 'chunked, chunked', 'identity', 'chunkez', 'chunked ', '']) t.equal(unsupportedTransferEncoding(header), header, JSON.stringify(header));
});
