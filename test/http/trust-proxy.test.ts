import t from 'tap';
import { createLogger } from '../../src/logging/logger.js';
import { habitsApp } from './fixtures/habits-app.js';

async function proxiedApp(trustProxy: string[]) {
  const lines: string[] = [];
  const logger = createLogger({ level: 'info', destination: { write: (line: string) => void lines.push(line) } });
  const fixture = await habitsApp({ http: { trustProxy }, log: { requests: true } }, logger);
  const send = (options: { remoteAddress: string; key: string; host?: string; headers?: Record<string, string> }) =>
    fixture.app.inject({
      method: 'POST',
      url: '/test/envelope',
      remoteAddress: options.remoteAddress,
      headers: { host: options.host ?? 'acme.test', authorization: `Bearer ${options.key}`, 'content-type': 'application/json', ...options.headers },
      payload: { method: 'status' },
    });
  /** The client address the access log gave the request with this id. */
  const loggedAddress = (reqId: string) =>
    lines
      .map((line) => JSON.parse(line) as { reqId?: string; msg?: string; req?: { remoteAddress?: string } })
      .find((record) => record.reqId === reqId && record.msg === 'incoming request')?.req?.remoteAddress;
  return { ...fixture, send, loggedAddress };
}

t.test('behind a trusted proxy, request.ip and the access log name the forwarded client', async (t) => {
  const fixture = await proxiedApp(['10.0.0.0/8']);
  t.teardown(fixture.close);
  const answer = await fixture.send({ remoteAddress: '10.1.2.3', key: fixture.acme.key, headers: { 'x-forwarded-for': '203.0.113.9', 'x-request-id': 'p-1' } });
  t.equal(answer.statusCode, 200);
  t.equal(answer.json().ip, '203.0.113.9');
  t.equal(fixture.loggedAddress('p-1'), '203.0.113.9');

  const chained = await fixture.send({ remoteAddress: '10.1.2.3', key: fixture.acme.key, headers: { 'x-forwarded-for': '198.51.100.1, 203.0.113.9, 10.9.9.9', 'x-request-id': 'p-2' } });
  t.equal(chained.json().ip, '203.0.113.9', 'the rightmost address that is not itself a trusted proxy');

  const direct = await fixture.send({ remoteAddress: '192.0.2.50', key: fixture.acme.key, headers: { 'x-forwarded-for': '203.0.113.9', 'x-request-id': 'p-3' } });
  t.equal(direct.json().ip, '192.0.2.50', 'a client that is not a trusted proxy cannot name another address');
  t.equal(fixture.loggedAddress('p-3'), '192.0.2.50');
});

t.test('without trustProxy, X-Forwarded-For is ignored', async (t) => {
  const fixture = await proxiedApp([]);
  t.teardown(fixture.close);
  const answer = await fixture.send({ remoteAddress: '10.1.2.3', key: fixture.acme.key, headers: { 'x-forwarded-for': '203.0.113.9', 'x-request-id': 'n-1' } });
  t.equal(answer.json().ip, '10.1.2.3');
  t.equal(fixture.loggedAddress('n-1'), '10.1.2.3');
});

t.test('behind a trusted proxy, X-Forwarded-Host does not choose the tenant: the Host header does', async (t) => {
  const fixture = await proxiedApp(['10.0.0.0/8']);
  t.teardown(fixture.close);
  const forwardedHost = (key: string, host: string, forwarded: string) =>
    fixture.send({ remoteAddress: '10.1.2.3', key, host, headers: { 'x-forwarded-host': forwarded, 'x-forwarded-for': '203.0.113.9' } });

  const own = await forwardedHost(fixture.acme.key, 'acme.test', 'globex.test');
  t.equal(own.statusCode, 200);
  t.equal(own.json().organization, fixture.acme.id, 'served as the tenant of its Host, not of X-Forwarded-Host');

  const picked = await forwardedHost(fixture.globex.key, 'acme.test', 'globex.test');
  t.equal(picked.statusCode, 403, "globex's key on acme's host is refused, whatever X-Forwarded-Host says");
  t.notOk(JSON.stringify(picked.json()).includes(fixture.globex.id));

  const unknownHost = await forwardedHost(fixture.acme.key, 'nobody.test', 'acme.test');
  t.equal(unknownHost.statusCode, 403, 'a Host that serves no organization is not rescued by X-Forwarded-Host');
});

t.test('a trustProxy entry that is neither an address nor a CIDR range fails the boot', async (t) => {
  await t.rejects(habitsApp({ http: { trustProxy: ['not-an-address'] } }));
});
