import t from 'tap';
import { key } from '../auth/fixtures/tenants.js';
import { automationApp, postJson } from '../api/fixtures/app.js';
import { itemsProvider, startUpstream } from '../api/fixtures/upstream.js';

const upstream = await startUpstream();
const fixture = await automationApp();
t.teardown(async () => {
  await fixture.close();
  await upstream.close();
});
const { app, store, acme, globex } = fixture;
const workflows = store.forOrganization(acme.organization_id).collection('workflows');
await store.forOrganization(acme.organization_id).collection('apis').insertOne(itemsProvider(upstream));
await workflows.insertOne({
  name: 'two-steps',
  steps: [
    { name: 'create', api: 'items', endpoint: 'create', method: 'post', data: { id: '${input.id}', title: 'Item ${input.title}' } },
    { name: 'copy', api: 'items', endpoint: 'create', method: 'post', data: { id: '${steps.create.id}-copy', source: '${steps.create}', n: '${input.n}' } },
  ],
  output: { first: '${steps.create.id}', second: '${steps.copy}' },
});
await workflows.insertOne({
  name: 'breaks',
  steps: [
    { name: 'create', api: 'items', endpoint: 'create', method: 'post', data: { id: '${input.id}' } },
    { name: 'boom', api: 'items', endpoint: 'fail', method: 'post' },
    { name: 'never', api: 'items', endpoint: 'create', method: 'post', data: { id: 'never' } },
  ],
});
await workflows.insertOne({ name: 'loop', steps: [{ name: 'again', workflow: 'loop' }] });
await workflows.insertOne({ name: 'outer', steps: [{ name: 'inner', workflow: 'breaks', input: { id: 'from-outer' } }] });
await workflows.insertOne({ name: 'notify', steps: [{ name: 'tell', ipc: { method: 'items.created', broadcast: true, data: { id: '${input.id}' } } }] });
await workflows.insertOne({ name: 'hurried', timeoutMs: 200, steps: [{ name: 'wait', api: 'items', endpoint: 'slow', method: 'get' }] });
fixture.automation.workflow.register('echo', { steps: [], output: '${input}' });

const run = (name: string, body: unknown, options: { key?: string | null } = {}) => postJson(app, `/workflows/${name}`, body, { tenant: acme, key: options.key });
const hitsSince = (from: number) => upstream.hits.slice(from).map((hit) => `${hit.method} ${hit.url} ${hit.body}`);

t.test('steps run in order; references carry values and types from the input and earlier steps', async (t) => {
  const before = upstream.hits.length;
  const reply = await run('two-steps', { 'two-steps': [{ id: '1', title: 'one', n: 5 }] });
  t.equal(reply.statusCode, 200);
  t.same(reply.json(), { 'two-steps': [{ first: '1', second: { id: '1-copy', source: { id: '1', title: 'Item one' }, n: 5 } }] });
  t.same(hitsSince(before), ['POST /items/1 {"title":"Item one"}', 'POST /items/1-copy {"source":{"id":"1","title":"Item one"},"n":5}']);
  t.equal(reply.headers['cache-control'], 'no-store');
});

t.test('each input runs once; results come back in order', async (t) => {
  const reply = await run('echo', { echo: [1, { a: [true] }, 'x'] });
  t.same(reply.json(), { echo: [1, { a: [true] }, 'x'] }, 'a workflow registered in code');
  t.same((await run('echo', { echo: [] })).json(), { echo: [] });
});

t.test('a failing step is reported by name, and the steps after it do not run', async (t) => {
  const before = upstream.hits.length;
  const reply = await run('breaks', { breaks: [{ id: 'b1' }] });
  t.equal(reply.statusCode, 502);
  t.same(reply.json(), { error: { code: 'step_failed', message: 'step "boom": provider "items" answered 500', step: 'boom' } });
  t.same(hitsSince(before), ['POST /items/b1 ', 'POST /fail '], 'step "never" never ran');
  const nested = await run('outer', { outer: [{}] });
  t.equal(nested.statusCode, 502);
  t.equal(nested.json().error.message, 'step "inner" → step "boom": provider "items" answered 500');
  const second = await run('two-steps', { 'two-steps': [{ id: '2', title: 't', n: 1 }, { title: 'no id' }] });
  t.equal(second.statusCode, 400);
  t.equal(second.json().error.message, 'input 1: step "create": ${input.id} has no value');
});

t.test("a step naming a workflow, api or endpoint that does not exist is the definition's fault: 422 step_refused, not the caller's 404", async (t) => {
  await workflows.insertOne({ name: 'dangling', steps: [{ name: 'build', workflow: 'no-such' }] });
  await workflows.insertOne({ name: 'no-provider', steps: [{ name: 'create', api: 'nope', endpoint: 'create', method: 'post' }] });
  const dangling = await run('dangling', { dangling: [{}] });
  t.equal(dangling.statusCode, 422);
  t.same(dangling.json(), { error: { code: 'step_refused', message: 'step "build": no workflow "no-such"', step: 'build' } });
  const noProvider = await run('no-provider', { 'no-provider': [{}] });
  t.equal(noProvider.statusCode, 422);
  t.same(noProvider.json(), { error: { code: 'step_refused', message: 'step "create": no api "nope" in this organization', step: 'create' } });
});

t.test("a value an earlier step did not give is the definition's fault (422 missing_step_value); one the input lacks the caller's (400)", async (t) => {
  await workflows.insertOne({
    name: 'reads-absent',
    steps: [
      { name: 'create', api: 'items', endpoint: 'create', method: 'post', data: { id: '${input.id}' } },
      { name: 'copy', api: 'items', endpoint: 'create', method: 'post', data: { id: '${steps.create.absent}' } },
    ],
  });
  const fromStep = await run('reads-absent', { 'reads-absent': [{ id: 'r1' }] });
  t.equal(fromStep.statusCode, 422);
  t.same(fromStep.json(), { error: { code: 'missing_step_value', message: 'step "copy": ${steps.create.absent} has no value', step: 'copy' } });
  const fromInput = await run('reads-absent', { 'reads-absent': [{}] });
  t.equal(fromInput.statusCode, 400);
  t.same(fromInput.json(), { error: { code: 'missing_reference', message: 'step "create": ${input.id} has no value', step: 'create' } });
});

t.test('recursion stops at the depth bound with the step named', async (t) => {
  const reply = await run('loop', { loop: [{}] });
  t.equal(reply.statusCode, 422);
  t.equal(reply.json().error.code, 'depth_exceeded');
  t.equal(reply.json().error.step, 'again');
  t.match(reply.json().error.message, /^step "again" → step "again" → .*workflows nest deeper than 8 levels$/);
});

t.test('the whole run is bounded in time', async (t) => {
  const reply = await run('hurried', { hurried: [{}] });
  t.equal(reply.statusCode, 504);
  t.match(reply.json().error, { code: 'workflow_timeout', step: 'wait', message: /^step "wait": workflow "hurried" did not finish within 200 ms/ });
});

t.test('an IPC step sends an envelope scoped to the organization; its result is the request result', async (t) => {
  const reply = await run('notify', { notify: [{ id: 'n1' }] });
  t.equal(reply.statusCode, 200);
  t.match(reply.json(), { notify: [{ replies: [{ ok: true, result: { method: 'items.created', data: { id: 'n1' } } }] }] });
  t.match(fixture.requests.at(-1), { method: 'items.created', broadcast: true, organization_id: acme.organization_id });
});

t.test("a tenant's IPC step reaches neither server processes by position nor methods acting on the server itself", async (t) => {
  const tenantWorkflows = store.forOrganization(globex.organization_id).collection('workflows');
  const cases: Array<[string, Record<string, unknown>, RegExp]> = [
    ['peek-worker', { method: 'overview.worker', data: {} }, /^step "peek": "overview\.worker" acts on the server itself; only the platform organization may call it/],
    ['read-metrics', { method: 'metrics.read' }, /"metrics\.read" acts on the server itself/],
    ['every-worker', { method: 'items.created', broadcast: true }, /the "broadcast" target selects server processes/],
  ];
  for (const [name, ipc, message] of cases) {
    await tenantWorkflows.insertOne({ name, steps: [{ name: 'peek', ipc }] });
    const sent = fixture.requests.length;
    const reply = await postJson(app, `/workflows/${name}`, { [name]: [{}] }, { tenant: globex });
    t.equal(reply.statusCode, 403, `${name}: ${reply.body}`);
    t.match(reply.json().error, { code: 'platform_only', message }, name);
    t.equal(fixture.requests.length, sent, `${name}: nothing was sent`);
  }
  // The platform's own workflow may read its server's overview.
  await workflows.insertOne({ name: 'peek-worker', steps: [{ name: 'peek', ipc: { method: 'overview.worker', data: {} } }] });
  const platform = await run('peek-worker', { 'peek-worker': [{}] });
  t.equal(platform.statusCode, 200, platform.body);
  t.match(fixture.requests.at(-1), { method: 'overview.worker', organization_id: acme.organization_id });
});

t.test('the route sets the method: an explicit different one is refused', async (t) => {
  const mismatch = await run('echo', { method: 'workflow.other', echo: [1] });
  t.equal(mismatch.statusCode, 400);
  t.equal(mismatch.json().error.code, 'method_mismatch');
  t.equal((await run('echo', { method: 'workflow.echo', echo: [1] })).statusCode, 200, 'the same method is fine');
});

t.test('unknown workflow 404; missing permission 403 (before the lookup, so nothing is revealed)', async (t) => {
  t.equal((await run('nope', { nope: [{}] })).statusCode, 404);
  const onlyOther = await key(store, { organizationId: acme.organization_id, name: 'other', permissions: { 'workflow.other': true } });
  t.equal((await run('echo', { echo: [1] }, { key: onlyOther })).statusCode, 403);
  t.equal((await run('nope', { nope: [1] }, { key: onlyOther })).statusCode, 403);
  const byName = await key(store, { organizationId: acme.organization_id, name: 'by-name', permissions: { workflow: { name: ['echo'] } } });
  t.equal((await run('echo', { echo: [1] }, { key: byName })).statusCode, 200, 'a name restriction on the workflow prefix');
  t.equal((await run('two-steps', { 'two-steps': [] }, { key: byName })).statusCode, 403);
  t.equal((await run('echo', { echo: [1] }, { key: null })).statusCode, 403, 'no key');
  const other = await postJson(app, '/workflows/two-steps', { 'two-steps': [{ id: 'x', title: 'x', n: 1 }] }, { tenant: globex });
  t.equal(other.statusCode, 404, "another organization's workflow is not visible");
});

t.test('malformed bodies are 400 naming the field, and nothing runs', async (t) => {
  const before = upstream.hits.length;
  const cases: Array<[unknown, RegExp]> = [
    [{ 'two-steps': [{ id: 'x' }], extra: 1 }, /^extra: unknown field/],
    [{ 'two-steps': { id: 'x' } }, /^two-steps: is required, a list of inputs/],
    [{}, /^two-steps: is required/],
    [[1], /^body: must be an object/],
    [{ 'two-steps': Array.from({ length: 101 }, () => ({})) }, /^two-steps: must NOT have more than 100 items/],
    [{ 'two-steps': [], apikey: 5 }, /^apikey/],
  ];
  for (const [body, message] of cases) {
    const reply = await run('two-steps', body);
    t.equal(reply.statusCode, 400, JSON.stringify(body).slice(0, 60));
    t.match(reply.json().error.message, message);
  }
  t.equal((await run('method', { method: [1] })).statusCode, 400, 'a reserved name');
  t.equal(upstream.hits.length, before);
});

t.test('a stored definition broken through CRUD is refused naming the field (422)', async (t) => {
  await workflows.insertOne({ name: 'broken', steps: [{ name: 'x', api: 'items' }] });
  const reply = await run('broken', { broken: [{}] });
  t.equal(reply.statusCode, 422);
  t.match(reply.json().error.message, /^workflow "broken" is not valid: steps\.0\.endpoint: is required/);
});
