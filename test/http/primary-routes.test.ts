import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import t from 'tap';
import { FallbackResponder } from '../../src/runtime/fallback.js';
import { primaryRoutesOnDemand, type PrimaryRoutes } from '../../primary-routes.js';
import { rawRequest, requestText } from './fixtures/raw-http.js';

/** Answers with the method, path and body it read: what the primary's real routes would see. */
const echoRoutes: PrimaryRoutes = (request: IncomingMessage, response: ServerResponse) => {
  const chunks: Buffer[] = [];
  request.on('data', (chunk: Buffer) => chunks.push(chunk));
  request.on('end', () => {
    const text = JSON.stringify({ method: request.method, url: request.url, body: Buffer.concat(chunks).toString('utf8') });
    response.writeHead(200, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(text) });
    response.end(text);
  });
  return true;
};

/** A fallback responder whose own routes come from `build`, listening on 127.0.0.1. */
async function primaryWith(build: () => Promise<PrimaryRoutes>) {
  const logged: string[] = [];
  const routes = primaryRoutesOnDemand(build, { error: (_fields, message) => logged.push(message) });
  // How many requests the routes took on: a test waits for this, not for time to pass.
  let claimed = 0;
  let onClaim = () => {};
  const fallback = new FallbackResponder({ serverId: 'server-1', retryAfterS: 5, status: () => 'fallback' });
  fallback.serveAlso({
    fallbackRoutes: (request, response) => {
      const taken = routes(request, response);
      if (taken) (claimed += 1), onClaim();
      return taken;
    },
  });
  const claimedAtLeast = (count: number) =>
    new Promise<void>((resolve) => {
      onClaim = () => claimed >= count && resolve();
      onClaim();
    });
  await new Promise<void>((resolve) => fallback.http.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise<void>((resolve) => fallback.http.close(() => resolve())));
  return { port: (fallback.http.address() as AddressInfo).port, logged, claimedAtLeast };
}

const postControl = (port: number, body: string) =>
  rawRequest(port, requestText('POST', '/control', ['Host: a', 'Content-Type: application/json'], body));

t.test('the routes are built on the first request they serve, once, and that request is answered with its body intact', async (t) => {
  let builds = 0;
  let release!: () => void;
  const ready = new Promise<void>((resolve) => (release = resolve));
  const { port, claimedAtLeast } = await primaryWith(async () => {
    builds += 1;
    await ready;
    return echoRoutes;
  });
  t.equal((await rawRequest(port, requestText('GET', '/healthz', ['Host: a']))).status, 200, 'probes are answered without building anything');
  t.equal((await rawRequest(port, requestText('GET', '/anything', ['Host: a']))).status, 503, 'other requests get the fallback answer');
  t.equal(builds, 0);
  // Two requests arrive while the build is still running: both wait for the one build.
  const first = postControl(port, '{"method":"status"}');
  const second = rawRequest(port, requestText('GET', '/metrics', ['Host: a']));
  await claimedAtLeast(2);
  t.equal(builds, 1);
  release();
  const [control, metrics] = await Promise.all([first, second]);
  t.equal(control.status, 200);
  t.same(JSON.parse(control.body), { method: 'POST', url: '/control', body: '{"method":"status"}' });
  t.equal(metrics.status, 200);
  t.same(JSON.parse(metrics.body), { method: 'GET', url: '/metrics', body: '' });
  t.equal((await postControl(port, '{}')).status, 200);
  t.equal(builds, 1, 'built once');
});

t.test('a build that fails answers 503 in the error shape, is logged, and is tried again on the next request', async (t) => {
  let builds = 0;
  const { port, logged } = await primaryWith(async () => {
    builds += 1;
    if (builds === 1) throw new Error('no app');
    return echoRoutes;
  });
  const refused = await postControl(port, '{}');
  t.equal(refused.status, 503);
  t.equal(refused.headers['cache-control'], 'no-store');
  t.match(refused.headers['content-type'], /^application\/json/);
  t.same(JSON.parse(refused.body), { error: { code: 'unavailable', message: 'the control routes of this primary are not available; retry later' } });
  t.ok(refused.closed);
  t.same(logged, ['the primary could not build its control routes']);
  const answered = await postControl(port, '{"method":"status"}');
  t.equal(answered.status, 200);
  t.equal(JSON.parse(answered.body).body, '{"method":"status"}');
  t.equal(builds, 2);
});
