import { createDecipheriv, createHmac, randomBytes } from 'node:crypto';
import { existsSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { request } from 'undici';
import { apply as applyCommand } from '../../cli/apply.js';
import { keys as keysCommand } from '../../cli/keys.js';
import { EmbeddedStore } from '../../src/db/embedded/store.js';
import { keyIdOf, parseSealed } from '../../src/secrets/box.js';
import { readKeyFile } from '../../src/secrets/key-file.js';
import { SecretKeyring, sealedKeyId } from '../../src/secrets/keyring.js';
import { startUpstream } from '../api/fixtures/upstream.js';
import { ServerProcess } from '../helpers/server-process.js';
import { dataDirWithTenants } from '../helpers/tenants.js';
import { firstLine, output, runCli, tempDir } from './fixtures/cli.js';
import { scaled } from '../helpers/wait.js';

// CLI processes compile the sources on start and the server forks a worker: seconds each on a busy machine.
t.setTimeout(scaled(300_000));
// In-process commands read this process's environment: it must not carry a key of whoever runs the tests.
delete process.env.FLEETPLANE_SECRETS_KEY;
delete process.env.FLEETPLANE_SECRETS_PREVIOUS_KEY;

const TOKEN = 'rotation-provider-token-8c1e';
const HOOK = 'rotation-hook-secret-37fa';
const LEGACY = 'legacy-plaintext-hook-5b0d';
const LATE = 'late-plaintext-token-e41a';
/** A plain header value: found in the database, the check's positive control. */
const MARKER = 'plain-marker-rotation-90cc';

const upstream = await startUpstream();
const { dataDir, tenants } = await dataDirWithTenants([{ name: 'acme', hosts: ['acme.test'] }]);
const acme = tenants[0]!;
const dbFile = path.join(dataDir, 'fleetplane.db');
const keyFile = path.join(dataDir, 'secrets.key');
// A second connection to the file, as a worker holds one: raw reads and writes below the sealing layer.
const raw = await EmbeddedStore.open(dbFile);
let server: ServerProcess | undefined;
t.teardown(async () => {
  await server?.stop();
  await raw.close();
  await upstream.close();
});

const endpoints = { create: { method: 'post', path: '/items/{id}' } };
const resources = {
  apis: [{ name: 'items', baseUrl: upstream.baseUrl, timeoutMs: 5000, headers: { 'x-api-token': { secret: TOKEN }, 'x-team': MARKER }, endpoints }],
  workflows: [{ name: 'make-item', steps: [{ name: 'create', api: 'items', endpoint: 'create', method: 'post', data: { id: '${input.id}' } }] }],
  webhooks: [{ name: 'github', verify: { scheme: 'hmac-sha256', header: 'x-hub-signature-256', prefix: 'sha256=', secret: HOOK }, workflows: { '*': 'make-item' } }],
};
const resourceFile = (content: unknown) => {
  const file = path.join(tempDir(), 'resources.json');
  writeFileSync(file, JSON.stringify(content));
  return file;
};
const read = (file: string) => (existsSync(file) ? readFileSync(file) : Buffer.alloc(0));
const onDisk = (text: string) => Buffer.concat([read(dbFile), read(`${dbFile}-wal`)]).includes(Buffer.from(text));
const scope = raw.forOrganization(acme.organization_id);
/** Every stored secret, with its place. */
async function storedSecrets(): Promise<Array<{ value: string; place: { organizationId: string; collection: string; path: string[] } }>> {
  const found = [];
  for (const api of await raw.collection('apis').find({})) {
    for (const [name, value] of Object.entries(api.headers as Record<string, unknown>)) {
      if (typeof value === 'object') found.push({ value: (value as { secret: string }).secret, place: { organizationId: String(api.organization_id), collection: 'apis', path: ['headers', name, 'secret'] } });
    }
  }
  for (const hook of await raw.collection('webhooks').find({})) {
    found.push({ value: (hook.verify as { secret: string }).secret, place: { organizationId: String(hook.organization_id), collection: 'webhooks', path: ['verify', 'secret'] } });
  }
  return found;
}
async function callApi(id: string, name = 'items') {
  const response = await request(`http://127.0.0.1:${server!.port}/api`, {
    method: 'POST',
    headers: { host: acme.host, authorization: `Bearer ${acme.adminKey}`, 'content-type': 'application/json' },
    body: JSON.stringify({ api: name, endpoint: 'create', method: 'post', data: { id } }),
  });
  return { status: response.statusCode, body: await response.body.text() };
}
async function deliver(name: string, headers: Record<string, string>, body = '{"id":"hook"}') {
  const response = await request(`http://127.0.0.1:${server!.port}/webhooks/${name}`, { method: 'POST', headers: { host: acme.host, 'content-type': 'application/json', ...headers }, body });
  await response.body.dump();
  return response.statusCode;
}
const sign = (body: string, secret: string) => `sha256=${createHmac('sha256', secret).update(body).digest('hex')}`;
const lastHitFor = (url: string) => upstream.hits.filter((hit) => hit.url === url).at(-1);

t.test('fleetplane apply seals provider and webhook secrets: neither the database file nor its WAL holds them', async (t) => {
  const printed = output();
  await applyCommand(['-f', resourceFile(resources), '--data-dir', dataDir], printed.stream);
  t.match(printed.text(), /3 resources: 3 created/);
  t.ok(onDisk(MARKER), 'positive control: a plain header value is found in the raw bytes');
  t.notOk(onDisk(TOKEN), 'the provider header secret is not on disk');
  t.notOk(onDisk(HOOK), 'the webhook secret is not on disk');
  t.equal(statSync(keyFile).mode & 0o777, 0o600, 'the key file was made on first need, mode 0600');
  const again = output();
  await applyCommand(['-f', resourceFile(resources), '--data-dir', dataDir], again.stream);
  t.match(again.text(), /3 resources: 0 created, 0 changed, 3 unchanged/, 'stored secrets are compared opened');
  const changed = structuredClone(resources);
  changed.webhooks[0]!.verify.secret = `${HOOK}-next`;
  const diff = output();
  await applyCommand(['-f', resourceFile(changed), '--data-dir', dataDir, '--json'], diff.stream);
  t.match(JSON.parse(diff.text()).resources, [{ outcome: 'unchanged' }, { outcome: 'unchanged' }, { kind: 'webhooks', outcome: 'changed', fields: ['verify'] }]);
  t.notOk(onDisk(`${HOOK}-next`));
  const back = output();
  await applyCommand(['-f', resourceFile(resources), '--data-dir', dataDir], back.stream);
  t.match(back.text(), /changed   webhooks\/github \(verify\)/);
});

t.test('a server started on plaintext secrets of an earlier version seals them; provider and webhook work over HTTP', async (t) => {
  await scope.collection('webhooks').insertOne({ name: 'legacy', verify: { scheme: 'token', header: 'x-legacy-token', secret: LEGACY }, workflows: { '*': 'make-item' } });
  server = await ServerProcess.start({ dataDir, workers: 1 });
  await server.readyWorkers(1);
  const legacy = (await scope.collection('webhooks').findOne({ name: 'legacy' }))!;
  t.equal(sealedKeyId((legacy.verify as { secret: string }).secret), keyIdOf(readKeyFile(keyFile)!.keys[0]!), 'sealed at start with the key file');
  t.equal(await deliver('legacy', { 'x-legacy-token': LEGACY }), 202, 'and still verifies');

  const reply = await callApi('before-rotation');
  t.equal(reply.status, 200, reply.body);
  t.equal((lastHitFor('/items/before-rotation'))!.headers['x-api-token'], TOKEN, 'the worker sends the opened secret upstream');
  const body = '{"id":"signed"}';
  t.equal(await deliver('github', { 'x-hub-signature-256': sign(body, HOOK) }, body), 202);
  t.equal(await deliver('github', { 'x-hub-signature-256': sign(body, 'guess') }, body), 401);
});

let oldKeys: Buffer[] = [];
let newKeyId = '';

t.test('rotate-secrets: every secret sealed with a new key, plaintext included; the old key opens none; the running server keeps working', async (t) => {
  // Plaintext written below the server (a store restored from an old backup): rotation seals it as well.
  await scope.collection('apis').insertOne({ name: 'late', baseUrl: upstream.baseUrl, headers: { 'x-api-token': { secret: LATE } }, endpoints });
  oldKeys = readKeyFile(keyFile)!.keys;
  const printed = output();
  await keysCommand(['rotate-secrets', '--data-dir', dataDir, '--json'], printed.stream);
  const result = JSON.parse(printed.text());
  newKeyId = result.key_id;
  t.not(newKeyId, keyIdOf(oldKeys[0]!));
  t.same(result.retired_key_ids, [keyIdOf(oldKeys[0]!)]);
  t.match(result, { resealed: 4, plaintext: 1, unreadable: [], key_source: 'file', key_file: keyFile });

  const secrets = await storedSecrets();
  t.equal(secrets.length, 4);
  for (const { value, place } of secrets) {
    t.equal(sealedKeyId(value), newKeyId, `${place.collection}.${place.path.join('.')} carries the new key id`);
    // The old key, tried directly with the right IV, tag and context, does not decrypt it.
    const sealed = parseSealed(value)!;
    const decipher = createDecipheriv('aes-256-gcm', oldKeys[0]!, sealed.iv, { authTagLength: 16 });
    decipher.setAAD(Buffer.from(`fpsec:v1:${sealed.keyId}\n${JSON.stringify([place.organizationId, place.collection, ...place.path])}`));
    decipher.setAuthTag(sealed.tag);
    t.throws(() => Buffer.concat([decipher.update(sealed.data), decipher.final()]), 'the old key does not decrypt it');
    t.throws(() => SecretKeyring.fromKeys(oldKeys).open(value, place), { name: 'SecretUnreadableError', reason: 'unknown_key' });
  }
  const keyFileNow = readKeyFile(keyFile)!;
  t.same(keyFileNow.keys.map(keyIdOf), [newKeyId], 'the key file holds only the new key');
  t.equal(statSync(keyFile).mode & 0o777, 0o600);

  const reply = await callApi('after-rotation');
  t.equal(reply.status, 200, reply.body);
  t.equal((lastHitFor('/items/after-rotation'))!.headers['x-api-token'], TOKEN, 'no restart: the worker read the new key file');
  t.equal((await callApi('late-one', 'late')).status, 200);
  t.equal((lastHitFor('/items/late-one'))!.headers['x-api-token'], LATE);
  const body = '{"id":"signed-after"}';
  t.equal(await deliver('github', { 'x-hub-signature-256': sign(body, HOOK) }, body), 202);
  t.equal(await deliver('legacy', { 'x-legacy-token': LEGACY }), 202);
  const serverOutput = JSON.stringify(server!.events) + server!.stderr.join('\n');
  for (const secret of [TOKEN, HOOK, LEGACY, LATE]) t.notMatch(serverOutput, secret, 'never in the server output');
});

t.test('bad flags or a bad FLEETPLANE_SECRETS_KEY: one line, non-zero exit, nothing changed', async (t) => {
  const keyFileBefore = readFileSync(keyFile);
  const secretsBefore = await storedSecrets();
  const cases: Array<[string[], NodeJS.ProcessEnv, number, RegExp]> = [
    [['--bogus'], {}, 2, /^fleetplane: unknown option "--bogus"/],
    [['--org', acme.organization_id], {}, 2, /^fleetplane: --org is not used by rotate-secrets \(it seals the secrets of every organization\)$/],
    [['now'], {}, 2, /^fleetplane: unexpected argument "now"$/],
    [[], { FLEETPLANE_SECRETS_KEY: 'not-a-key' }, 2, /^fleetplane: FLEETPLANE_SECRETS_KEY must be 32 bytes as base64 \(44 characters\) or hex \(64 characters\)/],
    [[], { FLEETPLANE_SECRETS_KEY: randomBytes(32).toString('base64') }, 1, /^fleetplane: 4 stored secrets are sealed with key [\w-]{12}, which FLEETPLANE_SECRETS_KEY or FLEETPLANE_SECRETS_PREVIOUS_KEY does not hold; nothing was changed/],
  ];
  for (const [args, env, code, message] of cases) {
    const result = await runCli(['keys', 'rotate-secrets', ...args, '--data-dir', dataDir], { env });
    t.equal(result.code, code, `${args.join(' ')} ${Object.keys(env).join(' ')}`);
    t.match(firstLine(result.stderr), message);
    t.notMatch(result.stderr, /not-a-key|\n\s+at /, 'neither the value nor a stack');
    t.equal(result.stdout, '');
  }
  t.same(readFileSync(keyFile), keyFileBefore, 'the key file is unchanged');
  t.same(await storedSecrets(), secretsBefore, 'every stored secret is unchanged');

  const empty = tempDir();
  const start = await runCli(['start', '--data-dir', empty, '--port', '0'], { env: { FLEETPLANE_SECRETS_KEY: 'zz' } });
  t.equal(start.code, 2);
  t.equal(start.stderr.trim().split('\n').length, 1, 'start refuses in one line');
  t.match(start.stderr, /^fleetplane: FLEETPLANE_SECRETS_KEY must be 32 bytes/);
  t.notOk(existsSync(path.join(empty, 'admin.key')), 'before the empty store is initialized');
});

t.test('with FLEETPLANE_SECRETS_KEY, rotate-secrets seals every secret with it, opening with the previous key', async (t) => {
  const keyFileBefore = readFileSync(keyFile);
  const next = randomBytes(32);
  const previous = readKeyFile(keyFile)!.keys[0]!;
  const env = { FLEETPLANE_SECRETS_KEY: next.toString('base64'), FLEETPLANE_SECRETS_PREVIOUS_KEY: previous.toString('hex') };
  const result = await runCli(['keys', 'rotate-secrets', '--data-dir', dataDir, '--json'], { env });
  t.equal(result.code, 0, result.stderr);
  t.match(JSON.parse(result.stdout), { key_id: keyIdOf(next), retired_key_ids: [newKeyId], resealed: 4, plaintext: 0, key_source: 'env' });
  for (const { value } of await storedSecrets()) t.equal(sealedKeyId(value), keyIdOf(next));
  t.same(readFileSync(keyFile), keyFileBefore, 'the key file is left alone');
  const text = await runCli(['keys', 'rotate-secrets', '--data-dir', dataDir], { env: { FLEETPLANE_SECRETS_KEY: next.toString('hex') } });
  t.equal(text.code, 0, text.stderr);
  t.match(text.stdout, /sealed 0 secrets with FLEETPLANE_SECRETS_KEY .*\nto rotate, set FLEETPLANE_SECRETS_PREVIOUS_KEY to the current key/);

  // Restarted with the key in its environment, the primary and its worker use it (not the key file).
  await server!.stop();
  server = await ServerProcess.start({ dataDir, workers: 1 }, { env: { FLEETPLANE_SECRETS_KEY: next.toString('base64') } });
  await server.readyWorkers(1);
  const reply = await callApi('env-key');
  t.equal(reply.status, 200, reply.body);
  t.equal(lastHitFor('/items/env-key')!.headers['x-api-token'], TOKEN);
  const body = '{"id":"signed-env"}';
  t.equal(await deliver('github', { 'x-hub-signature-256': sign(body, HOOK) }, body), 202);
});
