import { randomBytes } from 'node:crypto';
import t from 'tap';
import type { Store } from '../../src/db/types.js';
import { SecretKeyring, sealedKeyId } from '../../src/secrets/keyring.js';
import { sealPlaintextAtStart } from '../../src/secrets/startup.js';
import { resealSecrets, secretCensus } from '../../src/secrets/sweep.js';
import { testStore } from '../auth/fixtures/tenants.js';

const store = await testStore();
t.teardown(() => store.close());
const endpoints = { list: { method: 'get', path: '/items' } };
const acme = store.forOrganization('org-acme');
await acme.collection('apis').insertOne({ name: 'dotted', baseUrl: 'https://x.example', endpoints, headers: { 'x.dotted': { secret: 'dotted-plain' }, 'x-plain': 'shown' } });
await acme.collection('webhooks').insertOne({ name: 'hook', verify: { scheme: 'token', header: 'x-t', secret: 'hook-plain' }, workflows: { '*': 'w' } });
const keyring = SecretKeyring.fromKeys([randomBytes(32)]);
async function storedValue(collection: string, name: string, path: string[]): Promise<string> {
  let value: unknown = await acme.collection(collection).findOne({ name });
  for (const segment of path) value = (value as Record<string, unknown>)[segment];
  return value as string;
}
const open = async (collection: string, name: string, path: string[]) => {
  const stored = await storedValue(collection, name, path);
  return { stored, opened: keyring.open(stored, { organizationId: 'org-acme', collection, path }) };
};

function logger() {
  const lines: Array<{ level: string; details: Record<string, unknown>; message: string }> = [];
  const at = (level: string) => (details: Record<string, unknown>, message: string) => void lines.push({ level, details, message });
  return { lines, log: { info: at('info'), warn: at('warn'), error: at('error') } };
}

t.test('at start, plaintext from an earlier version is sealed in place; other fields are left alone', async (t) => {
  const { lines, log } = logger();
  await sealPlaintextAtStart(store, keyring, log);
  t.match(lines, [{ level: 'info', details: { sealed: 2, keyId: keyring.sealingKeyId() }, message: /sealed provider and webhook secrets stored in plain text/ }]);
  t.match(await open('apis', 'dotted', ['headers', 'x.dotted', 'secret']), { stored: /^fpsec:v1:/, opened: 'dotted-plain' }, 'a header name with a dot too');
  t.match(await open('webhooks', 'hook', ['verify', 'secret']), { stored: /^fpsec:v1:/, opened: 'hook-plain' });
  t.equal(((await acme.collection('apis').findOne({ name: 'dotted' }))!.headers as Record<string, unknown>)['x-plain'], 'shown');
  const again = logger();
  await sealPlaintextAtStart(store, keyring, again.log);
  t.same(again.lines, [], 'nothing left to do, nothing logged');
});

t.test('at start, secrets sealed with a key the server lacks are reported by key id; a failure is logged, not thrown', async (t) => {
  const stranger = SecretKeyring.fromKeys([randomBytes(32)]);
  await acme.collection('webhooks').insertOne({ name: 'foreign', verify: { scheme: 'token', header: 'x-t', secret: stranger.seal('x', { organizationId: 'org-acme', collection: 'webhooks', path: ['verify', 'secret'] }) }, workflows: { '*': 'w' } });
  const { lines, log } = logger();
  await sealPlaintextAtStart(store, keyring, log);
  t.match(lines, [{ level: 'warn', details: { keys: { [stranger.sealingKeyId()]: 1 } } }]);
  await acme.collection('webhooks').deleteOne({ name: 'foreign' });
  const broken = { collection: () => ({ find: async () => Promise.reject(new Error('store is gone')) }) } as unknown as Store;
  const failed = logger();
  await sealPlaintextAtStart(broken, keyring, failed.log);
  t.match(failed.lines, [{ level: 'error', details: { reason: 'store is gone' }, message: /run "fleetplane keys rotate-secrets"/ }]);
});

t.test('a write made while a secret is sealed again is never overwritten: the document is read again', async (t) => {
  await acme.collection('webhooks').updateOne({ name: 'hook' }, { $set: { 'verify.secret': 'plain-again' } });
  let raced = false;
  // The store as a tenant's concurrent update makes it look: the document changes between the read and the write.
  const racing = new Proxy(store, {
    get(target, property, receiver) {
      if (property !== 'collection') return Reflect.get(target, property, receiver);
      return (name: string) => {
        const collection = target.collection(name);
        return new Proxy(collection, {
          get(inner, key, innerReceiver) {
            if (key !== 'updateOne' || raced || name !== 'webhooks') return Reflect.get(inner, key, innerReceiver);
            return async (...args: Parameters<typeof collection.updateOne>) => {
              raced = true;
              await collection.updateOne({ name: 'hook' }, { $set: { 'verify.secret': 'written-meanwhile' } });
              return collection.updateOne(...args);
            };
          },
        });
      };
    },
  }) as Store;
  const result = await resealSecrets(racing, keyring, (value) => sealedKeyId(value) !== keyring.sealingKeyId());
  t.ok(raced);
  t.equal(result.resealed, 1);
  t.equal((await open('webhooks', 'hook', ['verify', 'secret'])).opened, 'written-meanwhile', 'the concurrent value, sealed; not the one read before it');
  const census = await secretCensus(store);
  t.same([census.plaintext, [...census.byKey]], [0, [[keyring.sealingKeyId(), 2]]]);
});

t.test('a value that does not open is reported by place, never by value, and left as it is', async (t) => {
  const hook = (await open('webhooks', 'hook', ['verify', 'secret'])).stored;
  const altered = hook.replace(/:([^:]+)$/, ':AAAA$1');
  await acme.collection('webhooks').updateOne({ name: 'hook' }, { $set: { 'verify.secret': altered } });
  const result = await resealSecrets(store, keyring, () => true);
  t.same(result.unreadable, [{ organization_id: 'org-acme', collection: 'webhooks', name: 'hook', field: 'verify.secret' }]);
  t.equal(result.resealed, 1, 'the provider secret that opens was sealed again');
  t.equal(await storedValue('webhooks', 'hook', ['verify', 'secret']), altered);
});
