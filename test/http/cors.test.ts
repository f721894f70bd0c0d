import t from 'tap';
import { habitsApp } from './fixtures/habits-app.js';

const preflight = (origin: string, url = '/test/envelope') => ({
  method: 'OPTIONS' as const,
  url,
  headers: { host: 'acme.test', origin, 'access-control-request-method': 'POST', 'access-control-request-headers': 'authorization, content-type' },
});

t.test('with an allow-list, a preflight from a listed origin gets 204 and the CORS headers, on an envelope route too', async (t) => {
  const fixture = await habitsApp({ http: { cors: { origins: ['https://console.acme.test'], maxAgeS: 120 } } });
  t.teardown(fixture.close);
  for (const url of ['/test/envelope', '/workflows/echo', '/control']) {
    const answer = await fixture.app.inject(preflight('https://console.acme.test', url));
    t.equal(answer.statusCode, 204, `${url}: the preflight passes instead of 405`);
    t.equal(answer.headers['access-control-allow-origin'], 'https://console.acme.test');
    t.match(answer.headers['access-control-allow-methods'], /POST/);
    t.equal(answer.headers['access-control-allow-headers'], 'authorization, content-type');
    t.equal(answer.headers['access-control-max-age'], '120');
    t.match(answer.headers.vary, /Origin/);
  }
});

t.test('a preflight from an origin not on the list gets no Access-Control-Allow-Origin and a clear refusal', async (t) => {
  const fixture = await habitsApp({ http: { cors: { origins: ['https://console.acme.test'] } } });
  t.teardown(fixture.close);
  for (const origin of ['https://evil.test', 'https://console.acme.test.evil.test', 'http://console.acme.test']) {
    const answer = await fixture.app.inject(preflight(origin));
    t.equal(answer.statusCode, 403, origin);
    t.notOk(answer.headers['access-control-allow-origin'], `${origin}: no allow-origin header`);
    t.same(answer.json(), { error: { code: 'origin_not_allowed', message: 'this origin may not call this server from a browser' } });
  }
});

t.test('CORS is not authorization: the actual request is authorized by its key whatever the origin', async (t) => {
  const fixture = await habitsApp({ http: { cors: { origins: ['https://console.acme.test'] } } });
  t.teardown(fixture.close);
  const post = (origin: string, key?: string) =>
    fixture.app.inject({
      method: 'POST',
      url: '/test/envelope',
      headers: { host: 'acme.test', origin, 'content-type': 'application/json', ...(key ? { authorization: `Bearer ${key}` } : {}) },
      payload: { method: 'status' },
    });
  const allowedWithKey = await post('https://console.acme.test', fixture.acme.key);
  t.equal(allowedWithKey.statusCode, 200);
  t.equal(allowedWithKey.headers['access-control-allow-origin'], 'https://console.acme.test');
  t.match(allowedWithKey.headers['access-control-expose-headers'], /x-request-id/);
  const allowedWithoutKey = await post('https://console.acme.test');
  t.equal(allowedWithoutKey.statusCode, 403, 'a listed origin does not stand in for a key');
  t.match(allowedWithoutKey.json(), { error: { code: String } });
  t.equal(allowedWithoutKey.headers['access-control-allow-origin'], 'https://console.acme.test', 'the browser may read the refusal');
  const otherWithKey = await post('https://evil.test', fixture.acme.key);
  t.equal(otherWithKey.statusCode, 200, 'an unlisted origin with a valid key is served: the browser, not the server, withholds the answer');
  t.notOk(otherWithKey.headers['access-control-allow-origin']);
  t.equal((await post('https://evil.test', fixture.globex.key)).statusCode, 403, "another tenant's key is refused as ever");
});

t.test('CORS is off by default: a preflight gets no CORS headers and the envelope route still answers 405', async (t) => {
  const fixture = await habitsApp();
  t.teardown(fixture.close);
  const answer = await fixture.app.inject(preflight('https://console.acme.test'));
  t.equal(answer.statusCode, 405);
  t.equal(answer.headers.allow, 'POST');
  t.notOk(answer.headers['access-control-allow-origin']);
});

t.test('an origin in the allow-list must be scheme://host[:port]', async (t) => {
  await t.rejects(habitsApp({ http: { cors: { origins: ['console.acme.test'] } } }), /http\.cors\.origins/);
  await t.rejects(habitsApp({ http: { cors: { origins: ['https://console.acme.test/'] } } }), /http\.cors\.origins/);
});
