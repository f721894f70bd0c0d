import { createHmac } from 'node:crypto';
import t from 'tap';
import { automationApp } from '../api/fixtures/app.js';
import { itemsProvider, startUpstream } from '../api/fixtures/upstream.js';
import { until as waitUntil } from '../helpers/wait.js';

const SECRET = 'webhook-secret-xyz';
const upstream = await startUpstream();
const fixture = await automationApp();
t.teardown(async () => {
  await fixture.close();
  await upstream.close();
});
const { app, store, acme, globex } = fixture;
const scope = store.forOrganization(acme.organization_id);
await scope.collection('apis').insertOne(itemsProvider(upstream));
await scope.collection('workflows').insertOne({
  name: 'make-item',
  steps: [{ name: 'create', api: 'items', endpoint: 'create', method: 'post', data: { id: '${input.id}', title: 'Item ${input.title}' } }],
  output: { created: '${steps.create}' },
});
await scope.collection('workflows').insertOne({ name: 'breaks', steps: [{ name: 'boom', api: 'items', endpoint: 'fail', method: 'post' }] });
await scope.collection('webhooks').insertOne({
  name: 'github',
  verify: { scheme: 'hmac-sha256', header: 'x-hub-signature-256', prefix: 'sha256=', secret: SECRET },
  event: { header: 'x-github-event' },
  workflows: { push: 'make-item', issues: 'breaks' },
});
await scope.collection('webhooks').insertOne({
  name: 'gitlab',
  verify: { scheme: 'token', header: 'x-gitlab-token', secret: SECRET },
  event: { field: 'object_kind' },
  workflows: { '*': 'make-item' },
});

const sign = (body: string, secret = SECRET) => `sha256=${createHmac('sha256', secret).update(body).digest('hex')}`;
function deliver(name: string, body: string, headers: Record<string, string>, host = acme.host) {
  return app.inject({ method: 'POST', url: `/webhooks/${name}`, headers: { host, 'content-type': 'application/json', ...headers }, payload: body });
}
const logged = (pattern: RegExp) => fixture.logs.some((line) => pattern.test(line));
const until = (condition: () => boolean): Promise<unknown> => waitUntil(String(condition), () => (condition() ? true : undefined));

t.test('a GitHub-style signed push → 202, and the mapped workflow reaches the provider after the reply', async (t) => {
  const before = upstream.hits.length;
  // Spacing and key order as the sender wrote them: the signature is over these exact bytes.
  const body = '{ "id": "gh-1",  "title": "pushed" }';
  const reply = await deliver('github', body, { 'x-hub-signature-256': sign(body), 'x-github-event': 'push' });
  t.equal(reply.statusCode, 202);
  t.same(reply.json(), { accepted: true, event: 'push', workflow: 'make-item' });
  t.equal(reply.headers['cache-control'], 'no-store');
  const [hit] = (await upstream.waitForHits(before + 1)).slice(before);
  t.equal(hit!.url, '/items/gh-1');
  t.same(JSON.parse(hit!.body), { title: 'Item pushed' });
});

t.test('a tampered body or a wrong signature → 401 and nothing runs', async (t) => {
  const before = upstream.hits.length;
  const body = '{"id":"gh-2","title":"original"}';
  const tampered = await deliver('github', body.replace('original', 'evil'), { 'x-hub-signature-256': sign(body), 'x-github-event': 'push' });
  t.equal(tampered.statusCode, 401);
  t.equal(tampered.json().error.code, 'invalid_signature');
  const wrongSecret = await deliver('github', body, { 'x-hub-signature-256': sign(body, 'guess'), 'x-github-event': 'push' });
  t.equal(wrongSecret.statusCode, 401);
  const noPrefix = await deliver('github', body, { 'x-hub-signature-256': sign(body).slice(7), 'x-github-event': 'push' });
  t.equal(noPrefix.statusCode, 401);
  t.equal((await deliver('github', body, { 'x-github-event': 'push' })).statusCode, 401, 'no signature at all');
  t.equal((await deliver('github', 'not json', { 'x-hub-signature-256': sign('{}'), 'x-github-event': 'push' })).statusCode, 401, 'verified before parsing');
  // A valid delivery afterwards is the marker: when it has reached the provider, nothing else had.
  const marker = '{"id":"marker","title":"m"}';
  t.equal((await deliver('github', marker, { 'x-hub-signature-256': sign(marker), 'x-github-event': 'push' })).statusCode, 202);
  const hits = (await upstream.waitForHits(before + 1)).slice(before);
  t.same(hits.map((hit) => hit.url), ['/items/marker'], 'only the valid delivery ran');
});

t.test('unknown webhook, unknown host → 404; secrets never in replies or logs', async (t) => {
  const body = '{"id":"x"}';
  const unknown = await deliver('nope', body, { 'x-hub-signature-256': sign(body), 'x-github-event': 'push' });
  t.equal(unknown.statusCode, 404);
  t.equal(unknown.json().error.code, 'unknown_webhook');
  t.equal((await deliver('github', body, { 'x-hub-signature-256': sign(body) }, 'nobody.test')).statusCode, 404, 'a host no organization serves');
  t.equal((await deliver('github', body, { 'x-hub-signature-256': sign(body), 'x-github-event': 'push' }, globex.host)).statusCode, 404, "another organization's webhook");
  t.equal((await deliver('a/b', body, {})).statusCode, 404);
  t.notOk(logged(new RegExp(SECRET)), 'the secret is not logged');
});

t.test('a static token header and an event from a JSON field', async (t) => {
  const before = upstream.hits.length;
  const body = JSON.stringify({ object_kind: 'merge_request', id: 'gl-1', title: 'mr' });
  t.equal((await deliver('gitlab', body, { 'x-gitlab-token': 'wrong' })).statusCode, 401);
  const reply = await deliver('gitlab', body, { 'x-gitlab-token': SECRET });
  t.equal(reply.statusCode, 202);
  t.same(reply.json(), { accepted: true, event: 'merge_request', workflow: 'make-item' }, '"*" maps every event');
  t.equal((await upstream.waitForHits(before + 1))[before]!.url, '/items/gl-1');
});

t.test('verified but unusable deliveries: 400 for a missing event or bad JSON, 200 for an unmapped event', async (t) => {
  const body = '{"id":"e"}';
  const noEvent = await deliver('github', body, { 'x-hub-signature-256': sign(body) });
  t.equal(noEvent.statusCode, 400);
  t.equal(noEvent.json().error.code, 'missing_event');
  const notJson = '{"id":';
  t.equal((await deliver('github', notJson, { 'x-hub-signature-256': sign(notJson), 'x-github-event': 'push' })).statusCode, 400);
  const poisoned = '{"__proto__":{"x":1},"id":"p"}';
  t.equal((await deliver('github', poisoned, { 'x-hub-signature-256': sign(poisoned), 'x-github-event': 'push' })).statusCode, 400, 'prototype poisoning');
  const ping = await deliver('github', body, { 'x-hub-signature-256': sign(body), 'x-github-event': 'ping' });
  t.equal(ping.statusCode, 200);
  t.same(ping.json(), { accepted: false, event: 'ping', workflow: null });
});

t.test("the workflow's failure after the 202 is logged, with the step, without secrets", async (t) => {
  const body = '{"id":"i"}';
  const reply = await deliver('github', body, { 'x-hub-signature-256': sign(body), 'x-github-event': 'issues' });
  t.equal(reply.statusCode, 202);
  await until(() => logged(/webhook workflow failed/));
  const line = JSON.parse(fixture.logs.find((entry) => /webhook workflow failed/.test(entry))!);
  t.match(line, { level: 50, webhook: 'github', event: 'issues', workflow: 'breaks', reason: 'step "boom": provider "items" answered 500' });
  t.notOk(logged(/upstream-token-123/), 'provider secrets are not logged either');
});

t.test('closing the app (shutdown, restart) waits for workflow runs started after a 202', async (t) => {
  const closing = await automationApp();
  const tenant = closing.store.forOrganization(closing.acme.organization_id);
  await tenant.collection('apis').insertOne(itemsProvider(upstream));
  await tenant.collection('workflows').insertOne({ name: 'takes-a-while', steps: [{ name: 'wait', api: 'items', endpoint: 'later', method: 'post' }] });
  await tenant.collection('webhooks').insertOne({ name: 'hook', verify: { scheme: 'token', header: 'x-token', secret: SECRET }, workflows: { '*': 'takes-a-while' } });
  const before = upstream.hits.length;
  const reply = await closing.app.inject({ method: 'POST', url: '/webhooks/hook', headers: { host: closing.acme.host, 'content-type': 'application/json', 'x-token': SECRET }, payload: '{}' });
  t.equal(reply.statusCode, 202);
  const [hit] = (await upstream.waitForHits(before + 1)).slice(before);
  t.equal(hit!.url, '/later', 'the run is waiting on its provider');
  await closing.app.close();
  t.ok(closing.logs.some((line) => /webhook workflow finished/.test(line)), 'the run had finished when close() resolved');
  await closing.automation.api.close();
  await closing.store.close();
});
