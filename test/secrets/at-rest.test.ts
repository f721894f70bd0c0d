import { createHmac } from 'node:crypto';
import t from 'tap';
import { itemsProvider, startUpstream } from '../api/fixtures/upstream.js';
import { sealedKeyId } from '../../src/secrets/keyring.js';
import { SealedStore } from '../../src/secrets/sealed-store.js';
import { post, sealedApp } from './fixtures/sealed-app.js';

const upstream = await startUpstream();
const fixture = await sealedApp();
t.teardown(async () => {
  await fixture.close();
  await upstream.close();
});
const { acme, globex, raw } = fixture;

/** Every secret written below; none may ever be found in the database file or its WAL. */
const SECRETS = {
  created: 'tok-created-5f1c9e',
  replacedHeaders: 'tok-replaced-headers-a81d',
  addedHeader: 'tok-added-header-77be',
  setSecret: 'tok-set-secret-c3d2',
  hookCreated: 'hook-created-0e94',
  tokenHook: 'hook-token-4b1f',
  hookVerify: 'hook-verify-set-9d2a',
  hookSecret: 'hook-secret-set-61c7',
};
/** A plain header value: reads show it, the database holds it as is (the check's positive control). */
const PLAIN_MARKER = 'plain-team-marker-e2d5';

const crud = (body: Record<string, unknown>, tenant = acme) => post(fixture, '/crud', body, { tenant });
const stored = async (collection: string, name: string, tenant = acme) => (await raw.forOrganization(tenant.organization_id).collection(collection).findOne({ name }))!;
/** The stored (sealed) verification secret of a webhook. */
const storedHookSecret = async (name: string) => ((await stored('webhooks', name)).verify as { secret: string }).secret;
const sign = (body: string, secret: string) => `sha256=${createHmac('sha256', secret).update(body).digest('hex')}`;
const deliver = (name: string, body: string, headers: Record<string, string>, tenant = acme) => post(fixture, `/webhooks/${name}`, undefined, { tenant, key: null, headers, raw: body });
const callApi = (data: Record<string, unknown>, tenant = acme) => post(fixture, '/api', { api: 'items', endpoint: 'create', method: 'post', data }, { tenant });
const onDisk = (text: string) => fixture.diskBytes().includes(Buffer.from(text, 'utf8'));

await raw.forOrganization(acme.organization_id).collection('workflows').insertOne({
  name: 'make-item',
  steps: [{ name: 'create', api: 'items', endpoint: 'create', method: 'post', data: { id: '${input.id}' } }],
});

t.test('secrets written through POST /crud (create, then every form of $set) are sealed in the database file and its WAL', async (t) => {
  const provider = itemsProvider(upstream, { headers: { 'x-api-token': { secret: SECRETS.created }, 'x-team': PLAIN_MARKER } });
  t.equal((await crud({ method: 'object.create', collection: 'apis', documents: [provider] })).status, 200);
  const webhooks = [
    { name: 'github', verify: { scheme: 'hmac-sha256', header: 'x-hub-signature-256', prefix: 'sha256=', secret: SECRETS.hookCreated }, workflows: { '*': 'make-item' } },
    { name: 'gitlab', verify: { scheme: 'token', header: 'x-gitlab-token', secret: SECRETS.tokenHook }, workflows: { '*': 'make-item' } },
  ];
  t.equal((await crud({ method: 'object.create', collection: 'webhooks', documents: webhooks })).status, 200);
  const updates: Array<[string, Record<string, unknown>]> = [
    ['apis', { $set: { headers: { 'x-api-token': { secret: SECRETS.replacedHeaders }, 'x-team': PLAIN_MARKER } } }],
    ['apis', { $set: { 'headers.x-extra': { secret: SECRETS.addedHeader } } }],
    ['apis', { $set: { 'headers.x-api-token.secret': SECRETS.setSecret } }],
    ['webhooks', { $set: { verify: { scheme: 'hmac-sha256', header: 'x-hub-signature-256', prefix: 'sha256=', secret: SECRETS.hookVerify } } }],
    ['webhooks', { $set: { 'verify.secret': SECRETS.hookSecret } }],
  ];
  for (const [collection, update] of updates) {
    const reply = await crud({ method: 'object.update', collection, filter: { name: collection === 'apis' ? 'items' : 'github' }, update });
    t.same(reply.json(), { matchedCount: 1, modifiedCount: 1 }, JSON.stringify(Object.keys(update.$set!)));
  }

  const bytes = fixture.diskBytes();
  t.ok(bytes.length > 0, 'the database and WAL were read');
  t.ok(onDisk(PLAIN_MARKER), 'positive control: a plain header value is found in the raw bytes');
  t.ok(onDisk('x-hub-signature-256'), 'positive control: a non-secret webhook field is found');
  for (const [name, secret] of Object.entries(SECRETS)) t.notOk(onDisk(secret), `${name} is not in fleetplane.db or fleetplane.db-wal`);

  const api = await stored('apis', 'items');
  const headers = api.headers as Record<string, { secret: string } | string>;
  t.match(headers['x-api-token'], { secret: /^fpsec:v1:/ });
  t.match(headers['x-extra'], { secret: /^fpsec:v1:/ });
  t.equal(headers['x-team'], PLAIN_MARKER);
  t.match((await stored('webhooks', 'github')).verify, { secret: /^fpsec:v1:/ });
  t.equal(sealedKeyId(await storedHookSecret('gitlab')), fixture.keyring.sealingKeyId());

  const read = await crud({ method: 'object.read', collection: 'apis', filter: { name: 'items' } });
  t.same(read.json().documents[0].headers, { 'x-api-token': { secret: '[redacted]' }, 'x-team': PLAIN_MARKER, 'x-extra': { secret: '[redacted]' } }, 'reads still redact');
  t.notMatch(read.text, /fpsec|tok-/, 'neither the sealed value nor the secret is returned');
});

t.test('the provider gets the opened header and signed deliveries are accepted, over real HTTP on 127.0.0.1', async (t) => {
  const before = upstream.hits.length;
  const reply = await callApi({ id: 'real-1' });
  t.equal(reply.status, 200);
  const hit = upstream.hits[before]!;
  t.equal(hit.headers['x-api-token'], SECRETS.setSecret, 'the latest secret, opened, goes upstream');
  t.equal(hit.headers['x-extra'], SECRETS.addedHeader);
  t.equal(hit.headers['x-team'], PLAIN_MARKER);
  const body = '{"id":"hooked-1"}';
  t.equal((await deliver('github', body, { 'x-hub-signature-256': sign(body, SECRETS.hookSecret) })).status, 202, 'HMAC with the stored secret');
  t.equal((await deliver('github', body, { 'x-hub-signature-256': sign(body, SECRETS.hookVerify) })).status, 401, 'the replaced secret no longer verifies');
  t.equal((await deliver('gitlab', body, { 'x-gitlab-token': SECRETS.tokenHook })).status, 202, 'token scheme');
  t.equal((await deliver('github', body, { 'x-hub-signature-256': sign(body, await storedHookSecret('github')) })).status, 401, 'the sealed text is not the secret');
  const logs = fixture.logs.join('');
  for (const secret of Object.values(SECRETS)) t.notMatch(logs, secret, 'never logged');
});

t.test('$push, $inc, $addToSet, $pull on a secret field, or a write inside a secret → 400, nothing changed', async (t) => {
  const [api, hook] = [await stored('apis', 'items'), await stored('webhooks', 'github')];
  const refused: Array<[string, Record<string, unknown>, RegExp]> = [
    ['apis', { $push: { 'headers.x-api-token.secret': 'x' } }, /^\$push cannot change headers\.x-api-token\.secret: apis keeps secrets there; use \$set or \$unset$/],
    ['apis', { $inc: { 'headers.x-count': 1 } }, /^\$inc cannot change headers\.x-count/],
    ['apis', { $addToSet: { headers: 'x' } }, /^\$addToSet cannot change headers/],
    ['webhooks', { $pull: { 'verify.secret': 'x' } }, /^\$pull cannot change verify\.secret/],
    ['webhooks', { $set: { 'verify.secret.part': 'x' } }, /^verify\.secret\.part: a secret is one string; \$set verify\.secret instead$/],
    ['webhooks', { $set: { 'verify.secret': 42 } }, /^verify\.secret: a secret must be a string$/],
    ['apis', { $set: { 'headers.x-api-token': { secret: { nested: 'plain' } } } }, /^headers\.x-api-token\.secret: a secret must be a string$/],
  ];
  for (const [collection, update, message] of refused) {
    const reply = await crud({ method: 'object.update', collection, filter: { name: collection === 'apis' ? 'items' : 'github' }, update });
    t.equal(reply.status, 400, JSON.stringify(update));
    t.equal(reply.json().error.code, 'secret_field');
    t.match(reply.json().error.message, message);
  }
  t.same(await stored('apis', 'items'), api);
  t.same(await stored('webhooks', 'github'), hook);
  const unset = await crud({ method: 'object.update', collection: 'apis', filter: { name: 'items' }, update: { $unset: { 'headers.x-extra': '' } } });
  t.same(unset.json(), { matchedCount: 1, modifiedCount: 1 }, '$unset removes a secret');
});

t.test('a sealed value copied into another organization is refused on write, and on use if planted in the store', async (t) => {
  const acmeHook = await storedHookSecret('github');
  const acmeToken = ((await stored('apis', 'items')).headers as Record<string, { secret: string }>)['x-api-token']!.secret;
  const copied = { name: 'github', verify: { scheme: 'hmac-sha256', header: 'x-hub-signature-256', prefix: 'sha256=', secret: acmeHook }, workflows: { '*': 'make-item' } };
  const created = await crud({ method: 'object.create', collection: 'webhooks', documents: [copied] }, globex);
  t.equal(created.status, 400);
  t.same(created.json().error, { code: 'invalid_secret', message: 'verify.secret: this sealed value (fpsec:...) does not belong to this field of this organization; send the secret itself' });
  t.equal(await raw.forOrganization(globex.organization_id).collection('webhooks').countDocuments(), 0, 'nothing written');

  // Planted below the API (someone with the database file): still bound to acme, so it does not open for globex.
  await raw.forOrganization(globex.organization_id).collection('webhooks').insertOne({ ...copied, workflows: { '*': 'none' } });
  await raw.forOrganization(globex.organization_id).collection('apis').insertOne(itemsProvider(upstream, { headers: { 'x-api-token': { secret: acmeToken } } }));
  const body = '{"id":"stolen"}';
  const delivery = await deliver('github', body, { 'x-hub-signature-256': sign(body, SECRETS.hookSecret) }, globex);
  t.equal(delivery.status, 503, "acme's secret does not verify globex's webhook");
  t.equal(delivery.json().error.code, 'webhook_unavailable');
  const before = upstream.hits.length;
  const call = await callApi({ id: 'stolen' }, globex);
  t.equal(call.status, 503);
  t.same(call.json().error, { code: 'secret_unreadable', message: 'api "items" cannot be used: a header secret cannot be decrypted on this server' });
  t.equal(upstream.hits.length, before, 'the upstream was never contacted');
  t.match(fixture.logs.join(''), /does not open with key .*: it was altered, or sealed for another organization or field/);

  // In its own place a sealed value written back is kept as it is: not sealed a second time.
  const again = await crud({ method: 'object.update', collection: 'webhooks', filter: { name: 'github' }, update: { $set: { 'verify.secret': acmeHook } } });
  t.equal(again.status, 200);
  t.equal(await storedHookSecret('github'), acmeHook);
  const moved = await crud({ method: 'object.update', collection: 'apis', filter: { name: 'items' }, update: { $set: { 'headers.x-moved.secret': acmeToken } } });
  t.equal(moved.status, 400, 'nor does it move to another header of the same provider');
});

t.test('a tampered sealed value → 503 for that provider or webhook, logged once, never a crash', async (t) => {
  const scope = raw.forOrganization(acme.organization_id);
  const token = ((await stored('apis', 'items')).headers as Record<string, { secret: string }>)['x-api-token']!.secret;
  const parts = token.split(':');
  parts[5] = `${parts[5]!.slice(0, -2)}${parts[5]!.endsWith('AA') ? 'BB' : 'AA'}`;
  await scope.collection('apis').updateOne({ name: 'items' }, { $set: { 'headers.x-api-token.secret': parts.join(':') } });
  const hook = await storedHookSecret('gitlab');
  await scope.collection('webhooks').updateOne({ name: 'gitlab' }, { $set: { 'verify.secret': hook.replace(/:([^:]+)$/, ':AAAA$1') } });
  const logsBefore = fixture.logs.length;
  const first = await callApi({ id: 'tampered' });
  const second = await callApi({ id: 'tampered' });
  for (const reply of [first, second]) {
    t.equal(reply.status, 503);
    t.equal(reply.json().error.code, 'secret_unreadable');
  }
  const logged = fixture.logs.slice(logsBefore).filter((line) => line.includes('a provider secret cannot be opened'));
  t.equal(logged.length, 1, 'the reason is logged once, not per call');
  t.match(logged[0], /headers\.x-api-token\.secret does not open/);
  const delivery = await deliver('gitlab', '{}', { 'x-gitlab-token': SECRETS.tokenHook });
  t.equal(delivery.status, 503);
  t.notMatch(delivery.text, /fpsec|hook-/);
  t.equal((await post(fixture, '/crud', { method: 'object.read', collection: 'apis' }, { tenant: acme })).status, 200, 'the server still serves');
  for (const secret of Object.values(SECRETS)) t.notMatch(fixture.logs.join(''), secret);
});

t.test('writes through server.db outside CRUD are sealed too; unscoped writes must name the organization', async (t) => {
  const sealed = new SealedStore(raw, fixture.keyring);
  await sealed.forOrganization(acme.organization_id).collection('webhooks').insertOne({ name: 'coded', verify: { scheme: 'token', header: 'x-t', secret: 'coded-secret-11aa' }, workflows: { '*': 'make-item' } });
  t.notOk(onDisk('coded-secret-11aa'));
  await t.rejects(sealed.collection('webhooks').updateMany({}, { $set: { 'verify.secret': 'x' } }), { code: 'secret_field', message: /sealed for one organization/ });
  await sealed.collection('webhooks').updateOne({ organization_id: acme.organization_id, name: 'coded' }, { $set: { 'verify.secret': 'coded-secret-22bb' } });
  t.equal(fixture.keyring.open(await storedHookSecret('coded'), { organizationId: acme.organization_id, collection: 'webhooks', path: ['verify', 'secret'] }), 'coded-secret-22bb');
  await t.rejects(sealed.forOrganization(acme.organization_id).collection('webhooks').updateOne({ 'verify.secret': 'x' }, { $set: { name: 'y' } }, { upsert: true }), { code: 'secret_field' });
});
