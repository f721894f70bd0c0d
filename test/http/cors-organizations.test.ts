import t from 'tap';
import { habitsApp } from './fixtures/habits-app.js';
import type { FleetplaneConfig } from '../../src/config/schema.js';

const preflight = (host: string, origin: string, url = '/test/envelope') => ({
  method: 'OPTIONS' as const,
  url,
  headers: { host, origin, 'access-control-request-method': 'POST', 'access-control-request-headers': 'authorization, content-type' },
});

/** The two-tenant app with acme listing `https://a.example` and globex listing nothing. */
async function withAcmeOrigins(config: FleetplaneConfig = {}, origins = ['https://a.example']) {
  const fixture = await habitsApp(config);
  await fixture.store.collection('organizations').updateOne({ _id: fixture.acme.id }, { $set: { cors: { origins } } });
  return fixture;
}

const configs: Array<[string, FleetplaneConfig]> = [
  ['global list empty', {}],
  ['global list set', { http: { cors: { origins: ['https://console.example'] } } }],
];
for (const [label, config] of configs) {
  t.test(`${label}: an organization's origin is allowed on its own hosts only`, async (t) => {
    const fixture = await withAcmeOrigins(config);
    t.teardown(fixture.close);
    const allowed = await fixture.app.inject(preflight('acme.test', 'https://a.example'));
    t.equal(allowed.statusCode, 204, "acme's origin on acme's host");
    t.equal(allowed.headers['access-control-allow-origin'], 'https://a.example');
    t.match(allowed.headers['access-control-allow-methods'], /POST/);
    t.equal(allowed.headers['access-control-allow-headers'], 'authorization, content-type');
    t.match(allowed.headers.vary, /Origin/);
    const other = await fixture.app.inject(preflight('globex.test', 'https://a.example'));
    t.equal(other.statusCode, 403, "acme's origin on globex's host");
    t.notOk(other.headers['access-control-allow-origin'], "an organization's list never opens another's host");
    t.same(other.json(), { error: { code: 'origin_not_allowed', message: 'this origin may not call this server from a browser' } });
    const unknown = await fixture.app.inject(preflight('acme.test', 'https://evil.example'));
    t.equal(unknown.statusCode, 403, 'an unlisted origin on acme');
    t.notOk(unknown.headers['access-control-allow-origin']);
    const post = await fixture.app.inject({
      method: 'POST',
      url: '/test/envelope',
      headers: { host: 'acme.test', origin: 'https://a.example', 'content-type': 'application/json', authorization: `Bearer ${fixture.acme.key}` },
      payload: { method: 'status' },
    });
    t.equal(post.statusCode, 200);
    t.equal(post.headers['access-control-allow-origin'], 'https://a.example', 'the actual request carries the header too');
  });
}

t.test('the global list applies on every host, with or without organization lists', async (t) => {
  const fixture = await withAcmeOrigins({ http: { cors: { origins: ['https://console.example'] } } });
  t.teardown(fixture.close);
  for (const host of ['acme.test', 'globex.test', 'unknown.test']) {
    const answer = await fixture.app.inject(preflight(host, 'https://console.example'));
    t.equal(answer.statusCode, 204, host);
    t.equal(answer.headers['access-control-allow-origin'], 'https://console.example', host);
  }
  const unknownHost = await fixture.app.inject(preflight('unknown.test', 'https://a.example'));
  t.equal(unknownHost.statusCode, 403, 'a host of no organization opens to no organization list');
  t.notOk(unknownHost.headers['access-control-allow-origin']);
});

t.test('a list changed in the store applies without a restart; emptied everywhere, CORS is off again', async (t) => {
  const fixture = await habitsApp();
  t.teardown(fixture.close);
  const organizations = fixture.store.collection('organizations');
  t.equal((await fixture.app.inject(preflight('acme.test', 'https://a.example'))).statusCode, 405, 'nothing lists origins: as without CORS');
  await organizations.updateOne({ _id: fixture.acme.id }, { $set: { cors: { origins: ['https://a.example'] } } });
  t.equal((await fixture.app.inject(preflight('acme.test', 'https://a.example'))).statusCode, 204);
  t.equal((await fixture.app.inject(preflight('globex.test', 'https://a.example'))).statusCode, 403);
  await organizations.updateOne({ _id: fixture.acme.id }, { $set: { cors: { origins: [] } } });
  const off = await fixture.app.inject(preflight('acme.test', 'https://a.example'));
  t.equal(off.statusCode, 405, 'an empty list configures nothing');
  t.notOk(off.headers['access-control-allow-origin']);
});

t.test('an organization document with an invalid origin is refused by the store', async (t) => {
  const fixture = await habitsApp();
  t.teardown(fixture.close);
  await t.rejects(
    fixture.store.collection('organizations').insertOne({ _id: 'bad', name: 'bad', hosts: ['bad.test'], cors: { origins: ['https://bad.test/'] }, createdAt: new Date().toISOString() }),
    /cors\.origins\.0/,
  );
});
