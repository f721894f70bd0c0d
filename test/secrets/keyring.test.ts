import { randomBytes } from 'node:crypto';
import { chmodSync, existsSync, readFileSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import t from 'tap';
import { loadConfig } from '../../src/config/load.js';
import { keyIdOf } from '../../src/secrets/box.js';
import { SecretKeyError, SecretUnreadableError } from '../../src/secrets/errors.js';
import { parseKeyText, replaceKeyFile, secretsKeyFile } from '../../src/secrets/key-file.js';
import { SecretKeyring } from '../../src/secrets/keyring.js';

const tempDir = () => mkdtempSync(path.join(tmpdir(), 'fleetplane-secrets-'));
const place = { organizationId: 'org-1', collection: 'webhooks', path: ['verify', 'secret'] };
const mode = (file: string) => statSync(file).mode & 0o777;

t.test('the key file is made on first need, mode 0600, and reused by every keyring of the directory', async (t) => {
  const file = path.join(tempDir(), 'secrets.key');
  const first = SecretKeyring.fromEnvironment(file, {});
  t.notOk(existsSync(file), 'not made before a secret is sealed');
  t.same(first.keyIds(), []);
  const sealed = first.seal('hook-secret', place);
  t.equal(mode(file), 0o600);
  t.same(readdirSync(path.dirname(file)), ['secrets.key'], 'no temporary file left behind');
  const second = SecretKeyring.fromEnvironment(file, {});
  t.equal(second.open(sealed, place), 'hook-secret', 'another process of the server opens it');
  t.equal(second.sealingKeyId(), first.sealingKeyId());
});

t.test('two processes making the key at once agree on one key', async (t) => {
  const file = path.join(tempDir(), 'secrets.key');
  // Both keyrings saw no file; the second one to create loses the race and reads the winner's key.
  const a = SecretKeyring.fromEnvironment(file, {});
  const b = SecretKeyring.fromEnvironment(file, {});
  const sealedByA = a.seal('x', place);
  t.equal(b.open(b.seal('y', place), place), 'y');
  t.equal(b.open(sealedByA, place), 'x');
  t.equal(a.sealingKeyId(), b.sealingKeyId());
});

t.test('a key file open to other users, or not holding a key, is refused with one line naming it', async (t) => {
  const file = path.join(tempDir(), 'secrets.key');
  SecretKeyring.fromEnvironment(file, {}).seal('x', place);
  chmodSync(file, 0o644);
  t.throws(() => SecretKeyring.fromEnvironment(file, {}), { name: 'SecretKeyError', message: `${file} is open to other users (mode 0644); run "chmod 600 ${file}"` });
  chmodSync(file, 0o600);
  writeFileSync(file, 'not a key\n');
  t.throws(() => SecretKeyring.fromEnvironment(file, {}), { message: `${file}: line 1 is not a 32-byte key (base64 or hex)` });
  writeFileSync(file, '# only a comment\n');
  t.throws(() => SecretKeyring.fromEnvironment(file, {}), { message: `${file} holds no key` });
});

t.test('FLEETPLANE_SECRETS_KEY: base64 or hex of 32 bytes, anything else refused without echoing it', async (t) => {
  const key = randomBytes(32);
  const file = path.join(tempDir(), 'secrets.key');
  for (const text of [key.toString('base64'), key.toString('base64url'), key.toString('hex'), `${key.toString('base64')}\n`]) {
    const keyring = SecretKeyring.fromEnvironment(file, { FLEETPLANE_SECRETS_KEY: text });
    t.equal(keyring.sealingKeyId(), keyIdOf(key));
  }
  t.notOk(existsSync(file), 'the key file is not used');
  const bad = ['short', randomBytes(16).toString('base64'), randomBytes(33).toString('base64'), 'z'.repeat(64), `${key.toString('hex')}00`];
  for (const text of bad) {
    let error: unknown;
    try {
      SecretKeyring.fromEnvironment(file, { FLEETPLANE_SECRETS_KEY: text });
    } catch (caught) {
      error = caught;
    }
    t.type(error, SecretKeyError);
    t.match((error as Error).message, /^FLEETPLANE_SECRETS_KEY must be 32 bytes as base64 \(44 characters\) or hex \(64 characters\)/);
    t.notOk((error as Error).message.includes(text), 'the value is not echoed');
    t.notMatch((error as Error).message, /\n/);
  }
  t.throws(() => SecretKeyring.fromEnvironment(file, { FLEETPLANE_SECRETS_PREVIOUS_KEY: key.toString('base64') }), { message: /FLEETPLANE_SECRETS_PREVIOUS_KEY is set without FLEETPLANE_SECRETS_KEY/ });
  const zeros = Buffer.alloc(32).toString('base64');
  t.same(parseKeyText(zeros), Buffer.alloc(32));
  t.equal(parseKeyText(zeros.replace(/A=$/, 'B=')), undefined, 'non-zero spare bits are not a key');
});

t.test('the key never enters the resolved configuration the primary hands its workers', async (t) => {
  const key = randomBytes(32).toString('base64');
  const { config } = loadConfig({ env: { FLEETPLANE_SECRETS_KEY: key, FLEETPLANE_SECRETS_PREVIOUS_KEY: key }, object: { dataDir: tempDir() } });
  t.notMatch(JSON.stringify(config), key);
  t.notOk(Object.hasOwn(config, 'secrets'), 'no secrets section at all');
});

t.test('with a previous key, values sealed by either open; new ones are sealed with the current key', async (t) => {
  const [current, previous] = [randomBytes(32), randomBytes(32)];
  const old = SecretKeyring.fromKeys([previous]).seal('old', place);
  const keyring = SecretKeyring.fromEnvironment('/nonexistent/secrets.key', { FLEETPLANE_SECRETS_KEY: current.toString('base64'), FLEETPLANE_SECRETS_PREVIOUS_KEY: previous.toString('hex') });
  t.equal(keyring.open(old, place), 'old');
  t.equal(keyring.sealingKeyId(), keyIdOf(current));
  t.equal(keyring.keyIds()[1], keyIdOf(previous));
});

t.test('opening: plaintext passes, a sealed value is bound to its place, unknown keys and tampering are named', async (t) => {
  const keyring = SecretKeyring.fromKeys([randomBytes(32)]);
  t.equal(keyring.open('stored before sealing', place), 'stored before sealing');
  const sealed = keyring.seal('hook-secret', place);
  t.throws(() => keyring.open(sealed, { ...place, organizationId: 'org-2' }), { name: 'SecretUnreadableError', reason: 'rejected', message: /webhooks\.verify\.secret does not open with key .*: it was altered, or sealed for another organization or field/ });
  t.throws(() => keyring.open(SecretKeyring.fromKeys([randomBytes(32)]).seal('x', place), place), { name: 'SecretUnreadableError', reason: 'unknown_key', message: /is sealed with key [\w-]{12}, which this keyring does not hold/ });
  t.throws(() => keyring.open('fpsec:v1:garbage', place), { name: 'SecretUnreadableError', reason: 'malformed' });
  t.equal(keyring.admit(sealed, place), sealed, 'a sealed value written back is kept, not sealed twice');
  t.throws(() => keyring.admit(sealed, { ...place, organizationId: 'org-2' }), SecretUnreadableError, 'but not in another organization');
  t.match(keyring.admit('plain', place), /^fpsec:v1:/);
});

t.test('a changed key file is picked up without a restart', async (t) => {
  const file = path.join(tempDir(), 'secrets.key');
  const server = SecretKeyring.fromEnvironment(file, {});
  const before = server.seal('a', place);
  const oldKey = Buffer.from(readFileSync(file, 'utf8').split('\n').find((line) => line && !line.startsWith('#'))!, 'base64');
  const newKey = randomBytes(32);
  replaceKeyFile(file, [newKey, oldKey]);
  const elsewhere = SecretKeyring.fromKeys([newKey]).seal('b', place);
  t.equal(server.open(elsewhere, place), 'b', 'a value under a key it did not hold makes it read the file again');
  t.equal(server.open(before, place), 'a');
  t.equal(server.sealingKeyId(), keyIdOf(newKey), 'and it seals with the new first key');
  t.equal(mode(file), 0o600);
});

t.test('a key file removed under a running process: sealing refuses instead of making a new key', async (t) => {
  const file = path.join(tempDir(), 'secrets.key');
  const keyring = SecretKeyring.fromEnvironment(file, {});
  const sealed = keyring.seal('a', place);
  const { unlinkSync } = await import('node:fs');
  unlinkSync(file);
  t.equal(keyring.open(sealed, place), 'a', 'what it holds still opens');
  t.throws(() => keyring.seal('b', place), { message: `${file} was removed while this process used it; restore it from a backup` });
  t.notOk(existsSync(file));
});

t.test('the key lives beside the embedded store file, or in the data directory for MongoDB', async (t) => {
  t.equal(secretsKeyFile({ dataDir: '/srv/data', db: {}, mongodb: {} } as never), '/srv/data/secrets.key');
  t.equal(secretsKeyFile({ dataDir: '/srv/data-a', db: { path: '/srv/shared/fleetplane.db' }, mongodb: {} } as never), '/srv/shared/secrets.key');
  t.equal(secretsKeyFile({ dataDir: '/srv/data', db: {}, mongodb: { url: 'mongodb://db' } } as never), '/srv/data/secrets.key');
});
