import type { AddressInfo } from 'node:net';
import t from 'tap';
import { createLogger } from '../../src/logging/logger.js';
import { FallbackResponder } from '../../src/runtime/fallback.js';
import { requestIdFor } from '../../src/http/request-id.js';
import { habitsApp } from './fixtures/habits-app.js';
import { rawRequest, requestText } from './fixtures/raw-http.js';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

async function loggingApp() {
  const lines: string[] = [];
  const logger = createLogger({ level: 'info', destination: { write: (line: string) => void lines.push(line) } });
  const fixture = await habitsApp({ log: { requests: true } }, logger);
  const records = () => lines.map((line) => JSON.parse(line) as Record<string, unknown>);
  return { ...fixture, records };
}

t.test('a valid X-Request-Id is taken, echoed, and is the reqId of every log record of the request', async (t) => {
  const fixture = await loggingApp();
  t.teardown(fixture.close);
  const answer = await fixture.app.inject({
    method: 'POST',
    url: '/test/envelope',
    headers: { host: 'acme.test', 'x-request-id': 'trace-42/abc:XYZ', 'content-type': 'application/json', authorization: `Bearer ${fixture.acme.key}` },
    payload: { method: 'status' },
  });
  t.equal(answer.statusCode, 200);
  t.equal(answer.headers['x-request-id'], 'trace-42/abc:XYZ');
  const records = fixture.records().filter((record) => 'reqId' in record);
  t.same(records.map((record) => record.msg), ['incoming request', 'handled', 'request completed'], "the access log and the handler's line");
  t.ok(records.every((record) => record.reqId === 'trace-42/abc:XYZ'));
  t.equal(fixture.records().filter((record) => record.reqId === undefined && 'req' in record).length, 0, 'no request record without it');
});

t.test('without the header, or with a malformed one, the id is generated, echoed and logged', async (t) => {
  const fixture = await loggingApp();
  t.teardown(fixture.close);
  const malformed: Array<[string, string | undefined]> = [
    ['absent', undefined],
    ['too long', 'a'.repeat(129)],
    ['empty', ''],
    ['with a space', 'one two'],
    ['with a tab', 'one\ttwo'],
    ['non-ASCII', 'idé'],
  ];
  const seen = new Set<string>();
  for (const [label, value] of malformed) {
    const answer = await fixture.app.inject({ method: 'GET', url: '/healthz', headers: { host: 'acme.test', ...(value === undefined ? {} : { 'x-request-id': value }) } });
    const id = answer.headers['x-request-id'] as string;
    t.match(id, UUID, `${label}: a generated UUID`);
    t.notOk(seen.has(id), `${label}: a fresh one`);
    seen.add(id);
    const logged = fixture.records().filter((record) => record.reqId === id);
    t.equal(logged.length, 2, `${label}: both access log lines carry it`);
  }
  const longest = 'b'.repeat(128);
  t.equal((await fixture.app.inject({ method: 'GET', url: '/healthz', headers: { 'x-request-id': longest } })).headers['x-request-id'], longest, '128 characters pass');
});

t.test('a header with control characters never reaches the id (what Node lets through is replaced)', async (t) => {
  const raw = (value: string) => requestIdFor({ headers: { 'x-request-id': value } } as never);
  t.match(raw('a\u0001b'), UUID);
  t.match(raw('a\u007fb'), UUID);
  t.match(raw('a\r\nb'), UUID);
  t.match(requestIdFor({ headers: { 'x-request-id': ['one', 'two'] } } as never), UUID, 'a repeated header');
  t.equal(raw('~!#$%&*+-.^_`|'), '~!#$%&*+-.^_`|', 'visible ASCII punctuation passes');
});

t.test('a 404 and a refusal carry the id too', async (t) => {
  const fixture = await habitsApp();
  t.teardown(fixture.close);
  const missing = await fixture.app.inject({ method: 'GET', url: '/nowhere', headers: { host: 'acme.test', 'x-request-id': 'r-404' } });
  t.equal(missing.statusCode, 404);
  t.equal(missing.headers['x-request-id'], 'r-404');
  const refused = await fixture.app.inject({ method: 'POST', url: '/test/envelope', headers: { host: 'acme.test', 'x-request-id': 'r-403', 'content-type': 'application/json' }, payload: { method: 'status' } });
  t.equal(refused.statusCode, 403);
  t.equal(refused.headers['x-request-id'], 'r-403', 'a refusal by authorization');
});

t.test("the primary's fallback answers echo the id, or give a fresh one", async (t) => {
  const fallback = new FallbackResponder({ serverId: 'server-1', retryAfterS: 5, status: () => 'fallback' });
  await new Promise<void>((resolve) => fallback.http.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise<void>((resolve) => fallback.http.close(() => resolve())));
  const port = (fallback.http.address() as AddressInfo).port;
  const given = await rawRequest(port, requestText('GET', '/x', ['Host: a', 'X-Request-Id: lb-7']));
  t.equal(given.status, 503);
  t.equal(given.headers['x-request-id'], 'lb-7');
  const generated = await rawRequest(port, requestText('GET', '/healthz', ['Host: a', `X-Request-Id: ${'x'.repeat(200)}`]));
  t.equal(generated.status, 200);
  t.match(generated.headers['x-request-id'], UUID);
});
