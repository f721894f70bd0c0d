import t from 'tap';
import { post, sealedApp } from '../secrets/fixtures/sealed-app.js';
import { envelopeSocket } from '../helpers/envelope-socket.js';

// The server as `start` wires it: CRUD over the sealing store, so stored secrets are in their sealed form.
const fixture = await sealedApp();
t.teardown(() => fixture.close());
const { acme, globex, raw } = fixture;
const crud = (body: Record<string, unknown>, tenant = acme) => post(fixture, '/crud', body, { tenant });
const scope = (collection: string, tenant = acme) => raw.forOrganization(tenant.organization_id).collection(collection);
/** Every document of the collection as stored, to show a refused write left them as they were. */
const storedAll = async (collection: string, tenant = acme) => JSON.stringify(await scope(collection, tenant).find({}, { sort: { _id: 1 } }));

const provider = {
  name: 'items',
  baseUrl: 'https://items.example',
  headers: { authorization: { secret: 'Bearer upstream-secret' }, 'x-team': 'blue' },
  endpoints: { list: { method: 'get', path: '/items' }, create: { method: 'post', path: '/items/{id}' } },
};
const orders = { name: 'orders', baseUrl: 'https://orders.example', endpoints: { list: { method: 'get', path: '/orders' } } };
const workflow = { name: 'make-item', steps: [{ name: 'create', api: 'items', endpoint: 'create', method: 'post', data: { id: '${input.id}' } }] };
// At the longest a secret may be, its sealed form is longer still: it must not be held against the document.
const webhook = { name: 'github', verify: { scheme: 'hmac-sha256', header: 'x-hub-signature-256', prefix: 'sha256=', secret: 's'.repeat(4096) }, workflows: { '*': 'make-item' } };

for (const [collection, document] of [['apis', provider], ['apis', orders], ['workflows', workflow], ['webhooks', webhook]] as const) {
  const created = await crud({ method: 'object.create', collection, documents: [document] });
  if (created.status !== 200) throw new Error(`seeding ${collection}: ${created.text}`);
}

const refusal = (reply: { status: number; json(): any }) => ({ status: reply.status, code: reply.json().error?.code, message: reply.json().error?.message });

t.test('object.create of a provider, workflow or webhook the runtime could not use is refused naming the field; nothing of the batch is written', async (t) => {
  const cases: Array<[string, Record<string, unknown>[], RegExp]> = [
    ['apis', [{ ...provider, name: 'junk', junk: 1 }], /^documents\.0: junk: unknown field$/],
    ['apis', [{ ...orders, name: 'fine' }, { ...orders, name: 'passwd', baseUrl: 'file:///etc/passwd' }], /^documents\.1: baseUrl: must be an http or https URL$/],
    ['apis', [{ ...orders, name: 'dots', endpoints: { up: { method: 'get', path: '/a/../b' } } }], /^documents\.0: endpoints\.up\.path: "\." and "\.\." segments are not allowed$/],
    ['apis', [{ name: 'no-base-url', endpoints: orders.endpoints }], /^documents\.0: baseUrl: is required$/],
    ['workflows', [{ name: 'stepless', steps: [{ name: 'nothing' }] }], /^documents\.0: steps\.0: a step needs exactly one of "api", "workflow" or "ipc"$/],
    ['workflows', [{ ...workflow, name: 'operator', steps: [{ name: 'stop', ipc: { method: 'shutdown' } }] }], /^documents\.0: steps\.0\.ipc\.method: "shutdown" is an operator control/],
    ['webhooks', [{ ...webhook, name: 'token', verify: { scheme: 'token', header: 'x-token', prefix: 'x', secret: 's' } }], /^documents\.0: verify\.prefix: unknown field$/],
    ['webhooks', [{ ...webhook, name: 'both', event: { header: 'x-event', field: 'type' } }], /^documents\.0: event: needs exactly one of "header" or "field"$/],
  ];
  for (const [collection, documents, message] of cases) {
    const before = await storedAll(collection);
    const reply = await crud({ method: 'object.create', collection, documents });
    t.match(refusal(reply), { status: 400, code: 'invalid_document', message }, `${collection}: ${JSON.stringify(documents).slice(0, 100)}`);
    t.equal(await storedAll(collection), before, 'nothing written');
  }
});

t.test('fields the store keeps are not held against a created document', async (t) => {
  const now = new Date().toISOString();
  const reply = await crud({ method: 'object.create', collection: 'apis', documents: [{ ...orders, name: 'dated', createdAt: now, updatedAt: now, organization_id: acme.organization_id }] });
  t.equal(reply.status, 200, reply.text);
  t.equal((await scope('apis').findOne({ name: 'dated' }))?.organization_id, acme.organization_id);
  await scope('apis').deleteOne({ name: 'dated' });
});

t.test('object.update is checked on the document it would leave: refused naming the field, the stored document unchanged', async (t) => {
  const cases: Array<[string, Record<string, unknown>, Record<string, unknown>, RegExp]> = [
    ['apis', { name: 'items' }, { $set: { junk: 1 } }, /^provider [0-9a-f]+: junk: unknown field$/],
    ['apis', { name: 'items' }, { $set: { baseUrl: 'file:///etc/passwd' } }, /^provider [0-9a-f]+: baseUrl: must be an http or https URL$/],
    ['apis', { name: 'items' }, { $set: { 'headers.host': 'evil.example' } }, /: headers\.host: set by the server, not by a provider$/],
    ['apis', { name: 'items' }, { $unset: { endpoints: '' } }, /: endpoints: is required$/],
    ['apis', { name: 'items' }, { $set: { timeoutMs: 'soon' } }, /: timeoutMs: /],
    ['workflows', { name: 'make-item' }, { $push: { steps: { name: 'later', workflow: 'x', extra: true } } }, /^workflow [0-9a-f]+: steps\.1\.extra: unknown field$/],
    ['workflows', { name: 'make-item' }, { $set: { 'steps.0.data': '${steps.nope}' } }, /^workflow [0-9a-f]+: steps\.0: \$\{steps\.nope\} is not an earlier step$/],
    ['webhooks', { name: 'github' }, { $set: { 'verify.scheme': 'md5' } }, /^webhook [0-9a-f]+: verify\.scheme: /],
    ['webhooks', { name: 'github' }, { $unset: { workflows: '' } }, /^webhook [0-9a-f]+: workflows: is required$/],
  ];
  for (const [collection, filter, update, message] of cases) {
    const before = await storedAll(collection);
    const reply = await crud({ method: 'object.update', collection, filter, update });
    t.match(refusal(reply), { status: 400, code: 'invalid_document', message }, `${collection}: ${JSON.stringify(update)}`);
    t.equal(await storedAll(collection), before, 'the stored document is unchanged');
  }
});

t.test('a valid update passes, sealed secrets and store fields included', async (t) => {
  const updates: Array<[string, Record<string, unknown>, Record<string, unknown>]> = [
    ['apis', { name: 'items' }, { $set: { timeoutMs: 3000, updatedAt: new Date().toISOString() } }],
    ['apis', { name: 'items' }, { $set: { 'headers.x-extra': { secret: 'another' } } }],
    ['webhooks', { name: 'github' }, { $set: { description: 'pushes' } }],
    ['workflows', { name: 'make-item' }, { $set: { timeoutMs: 5000 } }],
  ];
  for (const [collection, filter, update] of updates) {
    const reply = await crud({ method: 'object.update', collection, filter, update });
    t.same({ status: reply.status, body: reply.json() }, { status: 200, body: { matchedCount: 1, modifiedCount: 1 } }, `${collection}: ${JSON.stringify(update)}`);
  }
  t.match((await scope('webhooks').findOne({ name: 'github' }))?.verify, { secret: /^fpsec:/ }, 'the webhook secret is stored sealed, longer than the plain limit');
});

t.test('updateMany is all or nothing: one matched document left invalid refuses the write for all', async (t) => {
  const before = await storedAll('apis');
  // Valid for "items", which keeps its "create" endpoint; "orders" would be left with none.
  const reply = await crud({ method: 'object.update', collection: 'apis', filter: {}, update: { $unset: { 'endpoints.list': '' } } });
  t.match(refusal(reply), { status: 400, code: 'invalid_document', message: /^provider [0-9a-f]+: endpoints: / });
  t.equal(await storedAll('apis'), before, 'no provider changed');
});

t.test("a created document carrying another organization's organization_id is refused as $set of it is", async (t) => {
  const before = await storedAll('apis');
  const created = await crud({ method: 'object.create', collection: 'apis', documents: [{ ...orders, name: 'planted', organization_id: globex.organization_id }] });
  const set = await crud({ method: 'object.update', collection: 'apis', filter: { name: 'orders' }, update: { $set: { organization_id: globex.organization_id } } });
  t.match(refusal(set), { status: 400, code: 'invalid_input', message: /^organization_id cannot be changed through an organization scope/ });
  t.match(refusal(created), { status: 400, code: 'invalid_input', message: /^organization_id cannot be set to another organization through an organization scope/ });
  t.equal(await storedAll('apis'), before, 'nothing written');
  t.same(await scope('apis', globex).find({ name: 'planted' }), [], 'nothing reached the other organization');
  const things = await crud({ method: 'object.create', collection: 'things', documents: [{ v: 1 }, { v: 2, organization_id: globex.organization_id }] });
  t.match(refusal(things), { status: 400, code: 'invalid_input' }, 'in any collection');
  t.equal(await scope('things').countDocuments(), 0, 'the batch is all or nothing');
});

t.test("another organization's admin key gets the usual isolation answer: these documents are not there for it", async (t) => {
  const before = await storedAll('apis');
  for (const update of [{ $set: { baseUrl: 'file:///etc/passwd' } }, { $set: { junk: 1 } }, { $set: { timeoutMs: 1 } }]) {
    const reply = await crud({ method: 'object.update', collection: 'apis', filter: {}, update }, globex);
    t.same({ status: reply.status, body: reply.json() }, { status: 200, body: { matchedCount: 0, modifiedCount: 0 } }, JSON.stringify(update));
  }
  const byId = await crud({ method: 'object.update', collection: 'apis', filter: { _id: (await scope('apis').findOne({ name: 'items' }))!._id }, update: { $set: { junk: 1 } } }, globex);
  t.same(byId.json(), { matchedCount: 0, modifiedCount: 0 }, 'not even by id');
  t.equal(await storedAll('apis'), before, "acme's providers are unchanged");
  const own = await crud({ method: 'object.create', collection: 'apis', documents: [{ ...orders, baseUrl: 'file:///etc/passwd' }] }, globex);
  t.match(refusal(own), { status: 400, code: 'invalid_document', message: /^documents\.0: baseUrl: / }, 'and its own writes are checked alike');
});

t.test('the same check over the WebSocket', async (t) => {
  const { ask } = await envelopeSocket(t, `${fixture.baseUrl.replace('http', 'ws')}/ws`, { host: acme.host, authorization: `Bearer ${acme.adminKey}` });
  const before = await storedAll('apis');
  t.match(await ask({ requestId: 'set-junk', method: 'object.update', collection: 'apis', filter: { name: 'items' }, update: { $set: { baseUrl: 'file:///etc/passwd' } } }), {
    ok: false,
    error: { code: 'invalid_document', message: /baseUrl: must be an http or https URL$/ },
  });
  t.match(await ask({ requestId: 'create-junk', method: 'object.create', collection: 'apis', documents: [{ ...orders, name: 'ws', junk: 1 }] }), { ok: false, error: { code: 'invalid_document', message: 'documents.0: junk: unknown field' } });
  t.equal(await storedAll('apis'), before, 'nothing written');
});
