import t from 'tap';
import { Authorizer, type AuthorizerOptions } from '../../src/auth/authorize.js';
import { AuthorizationError } from '../../src/auth/errors.js';
import { createKey, generateKey, revokeKey } from '../../src/auth/keys.js';
import { FakeClock, settle } from '../helpers/fake-clock.js';
import { countingStore } from './fixtures/counting-store.js';
import { key, organization, testStore } from './fixtures/tenants.js';

const store = await testStore();
t.teardown(() => store.close());
const orgA = await organization(store, { name: 'Acme', hosts: ['a.example', 'a2.example'], defaultPermissions: { status: true } });
const orgB = await organization(store, { name: 'Beta', hosts: ['b.example'] });
const adminA = await key(store, { organizationId: orgA._id, name: 'admin', admin: true });
const otherA = await key(store, { organizationId: orgA._id, name: 'other', admin: true });
const readerA = await key(store, { organizationId: orgA._id, name: 'reader', permissions: { 'object.read': true } });
const boundA = await key(store, { organizationId: orgA._id, name: 'bound', admin: true, hosts: ['a2.example'] });
const revokedA = await key(store, { organizationId: orgA._id, name: 'revoked', admin: true });
const expiredA = await key(store, { organizationId: orgA._id, name: 'expired', admin: true, expiresAt: '2001-01-01T00:00:00Z' });
const adminB = await key(store, { organizationId: orgB._id, name: 'admin', admin: true });
await revokeKey(store, orgA._id, revokedA.split('.')[0]!);
const idOf = (fullKey: string) => fullKey.split('.')[0]!;

function setup(options: AuthorizerOptions = {}) {
  const clock = new FakeClock(Date.now());
  const counted = countingStore(store);
  // 429s are answered at once here (delayMs: 0); holding them has its own test.
  const authorizer = new Authorizer(counted.store, { clock, failureLimit: { max: 10, windowMs: 10_000, delayMs: 0 }, ...options });
  t.teardown(() => authorizer.close());
  /** The status code and error code of one request: `200`, `403 forbidden`, `429 too_many_requests`. */
  const outcome = async (address: string, credential: { key?: string; authorization?: string; apikey?: string; host?: string } = {}, method = 'object.read') => {
    const headers: Record<string, string> = {};
    if (credential.key) headers.authorization = `Bearer ${credential.key}`;
    if (credential.authorization) headers.authorization = credential.authorization;
    try {
      await authorizer.request({ host: credential.host ?? 'a.example', headers, socket: { remoteAddress: address } }, { method, ...(credential.apikey ? { apikey: credential.apikey } : {}) });
      return '200';
    } catch (error) {
      if (!(error instanceof AuthorizationError)) throw error;
      return `${error.statusCode} ${error.code}${error.retryAfterS === undefined ? '' : ` ${error.retryAfterS}`}`;
    }
  };
  return { clock, reads: counted.reads, authorizer, outcome };
}

/** One of each way a presented key fails authentication. */
const failures: Array<[string, { key?: string; authorization?: string; apikey?: string; host?: string }]> = [
  ['unknown key id', { key: generateKey().key }],
  ['wrong secret', { key: `${idOf(adminA)}.${generateKey().secret}` }],
  ["another organization's key", { key: adminB }],
  ['a key on a host outside its list', { key: boundA }],
  ['a key on an unknown host', { key: adminA, host: 'nowhere.example' }],
  ['a malformed key', { key: 'not-a-key' }],
  ['a malformed Authorization header', { authorization: `Basic ${adminA}` }],
  ['conflicting keys', { key: adminA, apikey: otherA }],
  ['a revoked key', { key: revokedA }],
  ['an expired key', { key: expiredA }],
];

t.test('every way a presented key fails counts; past the limit each of them is answered 429 with Retry-After', async (t) => {
  const { outcome } = setup();
  const first = [];
  for (const [, credential] of failures) first.push(await outcome('203.0.113.5', credential));
  t.same(first, [
    '403 forbidden',
    '403 forbidden',
    '403 forbidden',
    '403 forbidden',
    '403 forbidden',
    '403 malformed_key',
    '403 malformed_authorization',
    '403 conflicting_keys',
    '403 key_revoked',
    '403 key_expired',
  ]);
  for (const [name, credential] of failures) t.equal(await outcome('203.0.113.5', credential), '429 too_many_requests 1', name);
  t.equal(await outcome('203.0.113.5', { key: adminA }), '200', 'a valid key from the same address still passes');
  t.equal(await outcome('198.51.100.7', { key: generateKey().key }), '403 forbidden', 'another address is not affected');
});

t.test('requests without a key and keys refused a permission are not authentication failures', async (t) => {
  const { outcome } = setup();
  for (let i = 0; i < 50; i++) {
    t.equal(await outcome('203.0.113.5', {}, 'object.read'), '403 forbidden');
    t.equal(await outcome('203.0.113.5', { key: readerA }, 'workflow.deploy'), '403 permission_denied');
  }
  t.equal(await outcome('203.0.113.5', {}, 'status'), '200', "the organization's defaults still apply");
  t.equal(await outcome('203.0.113.5', { key: generateKey().key }), '403 forbidden', 'the address has its whole allowance');
});

t.test('over the limit, unknown key ids cost one store lookup per windowMs / max; the allowance comes back with time', async (t) => {
  const { clock, reads, outcome } = setup();
  t.equal(await outcome('203.0.113.5', { key: adminA }), '200');
  for (let i = 0; i < 10; i++) t.equal(await outcome('203.0.113.5', { key: generateKey().key }), '403 forbidden');
  const lookups = reads.keys ?? 0;
  t.equal(lookups, 11, 'the valid key and each of the ten unknown ids were looked up once');
  for (let i = 0; i < 1_000; i++) if ((await outcome('203.0.113.5', { key: generateKey().key })) !== '429 too_many_requests 1') t.fail('not refused with 429');
  t.equal(reads.keys, lookups + 1, 'a thousand unknown key ids over the limit, the clock standing still: one store lookup');
  t.equal(await outcome('203.0.113.5', { key: generateKey().key }), '429 too_many_requests 1');
  clock.advance(999);
  t.equal(await outcome('203.0.113.5', { key: generateKey().key }), '429 too_many_requests 1', 'not before windowMs / max');
  clock.advance(1);
  t.equal(await outcome('203.0.113.5', { key: generateKey().key }), '403 forbidden', 'one more real check after windowMs / max');
  t.equal(await outcome('203.0.113.5', { key: generateKey().key }), '429 too_many_requests 1');
  clock.advance(10_000);
  const recovered = [];
  for (let i = 0; i < 11; i++) recovered.push(await outcome('203.0.113.5', { key: generateKey().key }));
  t.same(recovered, [...Array<string>(10).fill('403 forbidden'), '429 too_many_requests 1'], 'after a whole window, the whole allowance');
});

t.test('valid keys are not locked out: cached, after the cache was emptied once they passed from that address, and others on a retry', async (t) => {
  const { clock, reads, outcome } = setup();
  t.equal(await outcome('203.0.113.5', { key: adminA }), '200', 'cached before the burst');
  for (let i = 0; i < 20; i++) await outcome('203.0.113.5', { key: generateKey().key });
  t.equal(await outcome('203.0.113.5', { key: adminA }), '200', 'a cached key passes over the limit');
  // Any key or organization write empties every process's cache (here at once: it goes through this store).
  await createKey(store, { organizationId: orgA._id, name: `cache-clear-${Date.now()}` });
  const lookups = reads.keys ?? 0;
  t.equal(await outcome('203.0.113.5', { key: adminA }), '200', 'a key that passed from this address is looked up again');
  t.equal(reads.keys, lookups + 1);
  t.equal(await outcome('203.0.113.5', { key: otherA }), '429 too_many_requests 1', 'a key this process never saw, while the lookup allowance is spent (by the burst), is refused');
  t.equal(reads.keys, lookups + 1, 'without a lookup');
  clock.advance(1_000);
  t.equal(await outcome('203.0.113.5', { key: otherA }), '200', 'and looked up on a retry after windowMs / max: a valid key is never locked out for good');
  t.equal(reads.keys, lookups + 2);
  t.equal(await outcome('203.0.113.5', { key: generateKey().key }), '403 forbidden', 'the refilled failure is checked as usual');
  t.equal(await outcome('203.0.113.5', { key: generateKey().key }), '429 too_many_requests 1', 'over the limit again: refused');
  t.equal(reads.keys, lookups + 4, 'after the one lookup of this interval');
  t.equal(await outcome('203.0.113.5', { key: generateKey().key }), '429 too_many_requests 1', 'the next unknown key id in the same interval');
  t.equal(reads.keys, lookups + 4, 'is refused without a lookup');
  t.equal(await outcome('203.0.113.5', { key: otherA }), '200', 'cached now, the new key passes from the limited address');
  t.equal(await outcome('203.0.113.5', { key: `${idOf(otherA)}.${generateKey().secret}` }), '429 too_many_requests 1', 'a wrong secret for a cached key id is still refused');
});

t.test('IPv6 clients are counted per /64', async (t) => {
  const { outcome } = setup();
  for (let i = 0; i < 10; i++) t.equal(await outcome(`2001:db8:1:2::${i + 1}`, { key: generateKey().key }), '403 forbidden');
  t.equal(await outcome('2001:db8:1:2:ffff::9', { key: generateKey().key }), '429 too_many_requests 1');
  t.equal(await outcome('2001:db8:1:3::1', { key: generateKey().key }), '403 forbidden', 'the next /64 is another client');
});

t.test('behind a trusted proxy the forwarded address is counted; a spoofed X-Forwarded-For is not believed', async (t) => {
  const { authorizer } = setup({ trustedProxies: ['10.0.0.0/8'] });
  const attempt = async (remoteAddress: string, forwardedFor: string) => {
    try {
      await authorizer.request({ host: 'a.example', headers: { authorization: `Bearer ${generateKey().key}`, 'x-forwarded-for': forwardedFor }, socket: { remoteAddress } }, { method: 'status' });
      return 200;
    } catch (error) {
      return (error as AuthorizationError).statusCode;
    }
  };
  for (let i = 0; i < 10; i++) t.equal(await attempt('10.0.0.1', '203.0.113.5'), 403);
  t.equal(await attempt('10.0.0.2', '203.0.113.5'), 429, 'the client is limited through any proxy');
  t.equal(await attempt('10.0.0.1', '198.51.100.7'), 403, 'another client behind the same proxy is not');
  for (let i = 0; i < 10; i++) t.equal(await attempt('192.0.2.9', `198.51.100.${i}`), 403);
  t.equal(await attempt('192.0.2.9', '198.51.100.200'), 429, 'an untrusted peer cannot escape the limit by forging X-Forwarded-For');
});

t.test('denials are logged, a bounded number per window, then a summary of how many were not', async (t) => {
  const lines: Array<{ details: Record<string, unknown>; message: string }> = [];
  const log = { info: (details: Record<string, unknown>, message: string) => void lines.push({ details, message }) };
  const { clock, outcome } = setup({ log, denialLog: { max: 5, windowMs: 10_000 } });
  const keys = Array.from({ length: 200 }, () => generateKey().key);
  for (const wrong of keys) await outcome('203.0.113.5', { key: wrong });
  t.equal(lines.length, 5, 'five lines in the window');
  t.match(lines[0], { message: 'authorization denied', details: { code: 'forbidden', method: 'object.read', client: '203.0.113.5' } });
  clock.advance(10_000);
  t.equal(lines.length, 6);
  t.match(lines[5], { message: '195 more authorization denials in the last 10 s were not logged', details: { suppressed: 195 } });
  const written = JSON.stringify(lines);
  t.notOk(keys.some((wrong) => written.includes(wrong.split('.')[1]!)), 'no secret in the log');
  await outcome('203.0.113.5', { key: generateKey().key });
  t.equal(lines.length, 7, 'the next window logs again');
});

t.test('a 429 is held for delayMs before it is answered, at most 1,000 at a time; valid keys are not held', async (t) => {
  const { clock, authorizer, outcome } = setup({ failureLimit: { max: 1, windowMs: 10_000, delayMs: 500 } });
  t.equal(await outcome('203.0.113.5', { key: adminA }), '200');
  t.equal(await outcome('203.0.113.5', { key: generateKey().key }), '403 forbidden', 'a refusal within the allowance is answered at once');
  let answered: string | undefined;
  const held = outcome('203.0.113.5', { key: generateKey().key }).then((result) => (answered = result));
  await settle();
  t.equal(answered, undefined, 'the 429 is not answered yet');
  t.equal(await outcome('203.0.113.5', { key: adminA }), '200', 'meanwhile a valid key from the same address passes at once');
  clock.advance(499);
  await settle();
  t.equal(answered, undefined, 'nor after 499 ms');
  clock.advance(1);
  await held;
  t.equal(answered, '429 too_many_requests 10', 'after 500 ms, with the time until the next failure is allowed');

  const request = { host: 'a.example', headers: { authorization: `Bearer ${generateKey().key}` }, socket: { remoteAddress: '203.0.113.5' } };
  const flood = Array.from({ length: 1_000 }, () => authorizer.request(request, { method: 'status' }).catch((error: AuthorizationError) => error.statusCode));
  await settle();
  t.equal(await outcome('203.0.113.5', { key: generateKey().key }), '429 too_many_requests 10', 'past 1,000 held, a 429 is answered at once');
  clock.advance(500);
  t.same(new Set(await Promise.all(flood)), new Set([429]), 'the held ones are answered when their time is up');
});
