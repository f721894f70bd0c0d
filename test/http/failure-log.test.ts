import t from 'tap';
import { automationApp, postJson } from '../api/fixtures/app.js';
import { itemsProvider, startUpstream } from '../api/fixtures/upstream.js';

const upstream = await startUpstream();
const fixture = await automationApp();
t.teardown(async () => {
  await fixture.close();
  await upstream.close();
});
const { app, store, acme } = fixture;
const scope = store.forOrganization(acme.organization_id);
await scope.collection('apis').insertOne(itemsProvider(upstream));
await scope.collection('workflows').insertOne({ name: 'breaks', steps: [{ name: 'boom', api: 'items', endpoint: 'fail', method: 'post' }] });
await scope.collection('webhooks').insertOne({
  name: 'github',
  verify: { scheme: 'hmac-sha256', header: 'x-hub-signature-256', prefix: 'sha256=', secret: 'webhook-secret' },
  event: { header: 'x-github-event' },
  workflows: { push: 'breaks' },
});

/** The log lines with this message written since `from`, parsed. */
const linesSince = (from: number, message: string) =>
  fixture.logs
    .slice(from)
    .map((line) => JSON.parse(line) as Record<string, unknown>)
    .filter((line) => line.msg === message);

t.test("a workflow that failed on the server's side: one warning naming the workflow, the step, the code and the reason", async (t) => {
  const from = fixture.logs.length;
  const reply = await postJson(app, '/workflows/breaks', { breaks: [{}] }, { tenant: acme });
  t.equal(reply.statusCode, 502);
  const lines = linesSince(from, 'workflow failed');
  t.equal(lines.length, 1);
  t.match(lines[0], { level: 40, workflow: 'breaks', step: 'boom', code: 'step_failed', reason: 'step "boom": provider "items" answered 500' });
});

t.test('a workflow refused for the caller is not logged', async (t) => {
  const from = fixture.logs.length;
  t.equal((await postJson(app, '/workflows/nope', { nope: [{}] }, { tenant: acme })).statusCode, 404);
  t.same(linesSince(from, 'workflow failed'), []);
});

t.test("an upstream's failure: one warning naming the provider, the endpoint, the code and the upstream's status", async (t) => {
  const from = fixture.logs.length;
  const reply = await postJson(app, '/api/items/fail', { method: 'post' }, { tenant: acme });
  t.equal(reply.statusCode, 502);
  const lines = linesSince(from, 'api call failed');
  t.equal(lines.length, 1);
  t.match(lines[0], { level: 40, api: 'items', endpoint: 'fail', code: 'upstream_failed', upstreamStatus: 500 });
});

t.test('an API call the caller got wrong is not logged', async (t) => {
  const from = fixture.logs.length;
  t.equal((await postJson(app, '/api', { api: 'nope', endpoint: 'x', method: 'post' }, { tenant: acme })).statusCode, 404);
  t.same(linesSince(from, 'api call failed'), []);
});

t.test('a manager request on a server that manages no fleet: one warning naming the method and the code', async (t) => {
  const from = fixture.logs.length;
  const reply = await postJson(app, '/manager', { method: 'createServer', cluster: 'c1' }, { tenant: acme });
  t.equal(reply.statusCode, 503);
  const lines = linesSince(from, 'manager request failed');
  t.equal(lines.length, 1);
  t.match(lines[0], { level: 40, method: 'manager.createServer', code: 'unavailable' });
});

t.test('a refused webhook signature: one info line naming the webhook, nothing else about the delivery', async (t) => {
  const from = fixture.logs.length;
  const reply = await app.inject({
    method: 'POST',
    url: '/webhooks/github',
    headers: { host: acme.host, 'content-type': 'application/json', 'x-hub-signature-256': 'sha256=00', 'x-github-event': 'push' },
    payload: '{}',
  });
  t.equal(reply.statusCode, 401);
  const lines = linesSince(from, 'webhook signature refused');
  t.equal(lines.length, 1);
  t.match(lines[0], { level: 30, webhook: 'github' });
  t.notMatch(JSON.stringify(lines[0]), /webhook-secret/, 'the secret is not logged');
});

t.test('an unknown webhook is not logged', async (t) => {
  const from = fixture.logs.length;
  const reply = await app.inject({ method: 'POST', url: '/webhooks/nope', headers: { host: acme.host, 'content-type': 'application/json' }, payload: '{}' });
  t.equal(reply.statusCode, 404);
  t.same(linesSince(from, 'webhook signature refused'), []);
});
