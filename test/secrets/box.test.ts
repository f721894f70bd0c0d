import { randomBytes } from 'node:crypto';
import t from 'tap';
import { SecretBox, isSealed, keyIdOf, parseSealed } from '../../src/secrets/box.js';

const key = randomBytes(32);
const box = new SecretBox(key);
const context = JSON.stringify(['org-1', 'apis', 'headers', 'authorization', 'secret']);

t.test('a sealed value is self-describing, opens with its key and context, and never repeats', async (t) => {
  const sealed = box.seal('Bearer s3cret', context);
  t.match(sealed, /^fpsec:v1:[A-Za-z0-9_-]{12}:[A-Za-z0-9_-]+:[A-Za-z0-9_-]+:[A-Za-z0-9_-]+$/);
  t.ok(isSealed(sealed));
  t.notOk(isSealed('Bearer s3cret'));
  t.notMatch(sealed, /s3cret/);
  const parts = parseSealed(sealed)!;
  t.equal(parts.keyId, box.keyId, 'the value names the key that sealed it');
  t.equal(parts.iv.length, 12);
  t.equal(parts.tag.length, 16);
  t.equal(box.open(parts, context), 'Bearer s3cret');
  t.not(box.seal('Bearer s3cret', context), sealed, 'a fresh IV per value');
  t.equal(keyIdOf(key), box.keyId, 'the key id is derived from the key');
  t.not(keyIdOf(randomBytes(32)), box.keyId);
});

t.test('a value sealed for another organization, collection or field does not open', async (t) => {
  const parts = parseSealed(box.seal('token', context))!;
  for (const other of [
    ['org-2', 'apis', 'headers', 'authorization', 'secret'],
    ['org-1', 'webhooks', 'headers', 'authorization', 'secret'],
    ['org-1', 'apis', 'headers', 'x-other', 'secret'],
  ]) {
    t.equal(box.open(parts, JSON.stringify(other)), undefined, other.join('/'));
  }
});

t.test('an altered value, a wrong key or a malformed text does not open', async (t) => {
  const sealed = box.seal('token', context);
  const [prefix, version, keyId, iv, tag, data] = sealed.split(':') as [string, string, string, string, string, string];
  const flip = (text: string) => {
    const bytes = Buffer.from(text, 'base64url');
    bytes[0]! ^= 1;
    return bytes.toString('base64url');
  };
  for (const altered of [
    [prefix, version, keyId, flip(iv), tag, data],
    [prefix, version, keyId, iv, flip(tag), data],
    [prefix, version, keyId, iv, tag, flip(data)],
  ]) {
    t.equal(box.open(parseSealed(altered.join(':'))!, context), undefined);
  }
  t.equal(new SecretBox(randomBytes(32)).open(parseSealed(sealed)!, context), undefined, 'another key');
  for (const text of ['fpsec:v2:' + sealed.slice(9), 'fpsec:v1:short:a:b:c', `${sealed}:extra`, 'fpsec:v1:' + keyId + ':!!:' + tag + ':' + data]) {
    t.equal(parseSealed(text), undefined, text.slice(0, 24));
  }
  t.throws(() => new SecretBox(randomBytes(16)), RangeError, 'a key is 32 bytes');
});

t.test('inspecting a box never shows its key', async (t) => {
  const { inspect } = await import('node:util');
  t.notMatch(inspect(box, { showHidden: true, depth: 5 }), /Buffer|[0-9a-f]{2} [0-9a-f]{2} [0-9a-f]{2}/);
  t.notMatch(JSON.stringify(box), key.toString('base64'));
});
