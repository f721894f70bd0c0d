import type { AddressInfo } from 'node:net';
import fc from 'fast-check';
import t, { type Test } from 'tap';
import { duplicatedHeader } from '../../src/http/duplicate-headers.js';
import { automationApp } from '../api/fixtures/app.js';
import { rawRequest, requestText, type RawAnswer } from './fixtures/raw-http.js';

const fixture = await automationApp();
t.teardown(() => fixture.close());
const { app, acme, globex } = fixture;
await app.listen({ port: 0, host: '127.0.0.1' });
const { port } = app.server.address() as AddressInfo;
const json = 'Content-Type: application/json';
const bearer = (key: string) => `Authorization: Bearer ${key}`;
const STATUS = JSON.stringify({ method: 'status', master: true });

function assertRefused(t: Test, answer: RawAnswer, header: string) {
  t.equal(answer.status, 400);
  t.equal(answer.headers['cache-control'], 'no-store');
  t.match(answer.headers['content-type'], /^application\/json/);
  const body = JSON.parse(answer.body);
  t.same(Object.keys(body.error).sort(), ['code', 'message']);
  t.equal(body.error.code, 'duplicate_header');
  t.match(body.error.message, header, 'the message names the header');
  t.ok(answer.closed, 'the connection is closed');
}

t.test('the request with one Host and one Authorization reaches the handler (the refusals below are not a broken route)', async (t) => {
  const answer = await rawRequest(port, requestText('POST', '/control', [`Host: ${acme.host}`, bearer(acme.adminKey), json], STATUS), { keepOpen: true });
  t.equal(answer.status, 200);
  t.equal(fixture.requests.length, 1);
  fixture.requests.length = 0;
});

t.test('two Host headers → 400 duplicate_header before authorization; no handler runs', async (t) => {
  for (const hosts of [[acme.host, globex.host], [acme.host, acme.host], [globex.host, acme.host]]) {
    const headers = [`Host: ${hosts[0]}`, bearer(acme.adminKey), json, `host: ${hosts[1]}`];
    assertRefused(t, await rawRequest(port, requestText('POST', '/control', headers, STATUS)), 'Host');
  }
  t.same(fixture.requests, [], 'no envelope was sent');
});

t.test('two Authorization headers → 400 duplicate_header, whatever their case and even when equal', async (t) => {
  for (const [first, second] of [
    [bearer(acme.adminKey), bearer(globex.adminKey)],
    [bearer(acme.adminKey), bearer(acme.adminKey)],
    [bearer(acme.adminKey), `AUTHORIZATION: Bearer ${acme.adminKey}`],
  ]) {
    assertRefused(t, await rawRequest(port, requestText('POST', '/control', [`Host: ${acme.host}`, first!, json, second!], STATUS)), 'Authorization');
  }
  t.same(fixture.requests, [], 'no envelope was sent');
});

t.test('the rule holds on every route and on no route at all', async (t) => {
  const twoHosts = [`Host: ${acme.host}`, `Host: ${acme.host}`];
  assertRefused(t, await rawRequest(port, requestText('GET', '/healthz', twoHosts)), 'Host');
  assertRefused(t, await rawRequest(port, requestText('GET', '/nowhere', twoHosts)), 'Host');
  assertRefused(t, await rawRequest(port, requestText('POST', '/workflows/%zz', [...twoHosts, json], '{}')), 'Host');
  assertRefused(t, await rawRequest(port, requestText('POST', `/workflows/${'w'.repeat(101)}`, [...twoHosts, json], '{}')), 'Host');
});

t.test('a WebSocket upgrade with two Authorization headers is refused the same way and never upgraded', async (t) => {
  const upgrade = [`Host: ${acme.host}`, 'Connection: Upgrade', 'Upgrade: websocket', 'Sec-WebSocket-Version: 13', 'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ=='];
  const accepted = await rawRequest(port, requestText('GET', '/ws', [...upgrade, bearer(acme.adminKey)]), { keepOpen: true });
  t.equal(accepted.status, 101, 'with one Authorization header the upgrade happens');
  const refused = await rawRequest(port, requestText('GET', '/ws', [...upgrade, bearer(acme.adminKey), bearer(globex.adminKey)]));
  assertRefused(t, refused, 'Authorization');
});

t.test('duplicatedHeader finds exactly the repeated Host or Authorization, in any letter case', async (t) => {
  const name = fc.oneof(
    fc.constantFrom('host', 'Host', 'HOST', 'hOsT', 'authorization', 'Authorization', 'AUTHORIZATION', 'hosts', 'hos', 'x-host', 'authorisation', 'proxy-authorization', 'content-type'),
    fc.stringMatching(/^[a-zA-Z-]{1,14}$/),
  );
  fc.assert(
    fc.property(fc.array(fc.tuple(name, fc.string()), { maxLength: 12 }), (pairs) => {
      const count = (wanted: string) => pairs.filter(([header]) => header.toLowerCase() === wanted).length;
      const found = duplicatedHeader(pairs.flat());
      if (count('host') < 2 && count('authorization') < 2) return found === undefined;
      return (found === 'Host' && count('host') > 1) || (found === 'Authorization' && count('authorization') > 1);
    }),
    { numRuns: 2_000 },
  );
  t.equal(duplicatedHeader(['Host', 'a', 'X-Other', 'b', 'Authorization', 'c']), undefined);
  t.equal(duplicatedHeader(['Host', 'a', 'Authorization', 'c', 'HOST', 'b']), 'Host');
  t.equal(duplicatedHeader(['Hosu', 'a', 'Host', 'b']), undefined, 'a name of the same length that differs is not a Host');
});
