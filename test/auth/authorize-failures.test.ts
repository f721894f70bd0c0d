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
  // Refusals are answered at once here (delayMs: 0, refusalFloorMs: 0); holding them has its own tests.
  const authorizer = new Authorizer(counted.store, { clock, failureLimit: { max: 10, windowMs: 10_000, delayMs: 0 }, refusalFloorMs: 0, ...options });
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
  return { clock, reads: counted.reads, scans: counted.scans, authorizer, outcome };
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
  // Each failure past the limit is charged too: one more refill interval (1 s) to wait after each.
  for (const [index, [name, credential]] of failures.entries()) t.equal(await outcome('203.0.113.5', credential), `429 too_many_requests ${index + 2}`, name);
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
  for (let i = 0; i < 1_000; i++) if (!(await outcome('203.0.113.5', { key: generateKey().key })).startsWith('429 too_many_requests ')) t.fail('not refused with 429');
  t.equal(reads.keys, lookups + 1, 'a thousand unknown key ids over the limit, the clock standing still: one store lookup');
  t.equal(await outcome('203.0.113.5', { key: generateKey().key }), '429 too_many_requests 11', 'the debt is bounded: max + 1 refill intervals at most');
  clock.advance(999);
  t.equal(await outcome('203.0.113.5', { key: generateKey().key }), '429 too_many_requests 11', 'an address that keeps failing stays limited');
  t.equal(reads.keys, lookups + 1, 'and no lookup before windowMs / max');
  clock.advance(1);
  t.equal(await outcome('203.0.113.5', { key: generateKey().key }), '429 too_many_requests 11', 'after windowMs / max, one more lookup, refused alike');
  t.equal(reads.keys, lookups + 2);
  clock.advance(11_000);
  t.equal(await outcome('203.0.113.5', { key: generateKey().key }), '403 forbidden', 'quiet for max + 1 refill intervals, the address may fail again');
  t.equal(await outcome('203.0.113.5', { key: generateKey().key }), '429 too_many_requests 2');
  clock.advance(11_000);
  const recovered = [];
  for (let i = 0; i < 11; i++) recovered.push(await outcome('203.0.113.5', { key: generateKey().key }));
  t.same(recovered, [...Array<string>(10).fill('403 forbidden'), '429 too_many_requests 2'], 'after a whole window, the whole allowance');
});

t.test('valid keys are not locked out: cached, after the cache was emptied once they passed from that address, and keys this process never read', async (t) => {
  // The cache checks the store's change counters on every read here, so each write is seen once, at the next
  // read (by default a write through this process is seen at once, and once more at the next check).
  const { reads, scans, outcome } = setup({ revalidateMs: 0 });
  t.equal(await outcome('203.0.113.5', { key: adminA }), '200', 'cached before the burst');
  for (let i = 0; i < 20; i++) await outcome('203.0.113.5', { key: generateKey().key });
  t.equal(scans.keys, 1, 'the made-up ids over the limit were checked against one read of the list of key ids');
  t.equal(await outcome('203.0.113.5', { key: adminA }), '200', 'a cached key passes over the limit');
  // Any key or organization write empties every process's cache (here at once: it goes through this store).
  await createKey(store, { organizationId: orgA._id, name: `cache-clear-${Date.now()}` });
  const lookups = reads.keys ?? 0;
  t.equal(await outcome('203.0.113.5', { key: adminA }), '200', 'a key that passed from this address is looked up again');
  t.equal(reads.keys, lookups + 1);
  t.match(await outcome('203.0.113.5', { key: generateKey().key }), /^429 too_many_requests /, 'the lookup allowance is spent (by the burst)');
  t.equal(scans.keys, 2, 'the key written made the list be read again, once');
  t.equal(await outcome('203.0.113.5', { key: otherA }), '200', 'a key this process never read passes from the limited address at once');
  t.equal(reads.keys, lookups + 2, 'its record read once');
  for (let i = 0; i < 1_000; i++) if (!(await outcome('203.0.113.5', { key: generateKey().key })).startsWith('429 too_many_requests ')) t.fail('not refused with 429');
  t.equal(reads.keys, lookups + 2, 'a thousand made-up ids, the clock standing still: no lookup');
  t.equal(scans.keys, 2, 'and no read of the list while no key is written');
  const created = await createKey(store, { organizationId: orgA._id, name: `new-${Date.now()}`, admin: true });
  t.equal(await outcome('203.0.113.5', { key: created.key }), '200', 'a key created since passes from the limited address');
  t.equal(scans.keys, 3, 'the write made the list be read again, once');
  t.equal(await outcome('203.0.113.5', { key: otherA }), '200', 'cached now, the key passes again');
  t.match(await outcome('203.0.113.5', { key: `${idOf(otherA)}.${generateKey().secret}` }), /^429 too_many_requests /, 'a wrong secret for a cached key id is refused alike');
  t.match(await outcome('203.0.113.5', { key: `${idOf(created.key)}.${generateKey().secret}` }), /^429 too_many_requests /, 'and for the new key id');
});

t.test('a key this process has read before is still looked up over the limit after the cache was emptied, however many reads the flood spent', async (t) => {
  const { reads, outcome } = setup();
  // otherA is used from another address first: this process has read its record, but never from this address.
  t.equal(await outcome('198.51.100.7', { key: otherA }), '200');
  for (let i = 0; i < 50; i++) await outcome('203.0.113.5', { key: generateKey().key });
  await createKey(store, { organizationId: orgA._id, name: `cache-clear-${Date.now()}` });
  // The flood spends this interval's lookup for ids never seen.
  t.match(await outcome('203.0.113.5', { key: generateKey().key }), /^429 /);
  const lookups = reads.keys ?? 0;
  t.match(await outcome('203.0.113.5', { key: generateKey().key }), /^429 /, 'a made-up id is refused without a lookup');
  t.equal(reads.keys, lookups);
  t.equal(await outcome('203.0.113.5', { key: otherA }), '200', 'the key in use is read again and passes');
  t.equal(reads.keys, lookups + 1);
  t.match(await outcome('203.0.113.5', { key: `${idOf(otherA)}.${generateKey().secret}` }), /^429 /, 'a wrong secret for it is refused alike');
});

t.test("with a ledger, an address has one allowance across processes; a ledger that cannot answer leaves each process counting on its own", async (t) => {
  const clock = new FakeClock(Date.now());
  const options = { clock, failureLimit: { max: 10, windowMs: 10_000, delayMs: 0 }, refusalFloorMs: 0 };
  // The primary: it counts its own failures and those the workers report.
  const primary = new Authorizer(store, options);
  let reachable = true;
  const ledger = { fail: async (address: string) => (reachable ? primary.reportedFailure({ address }) : Promise.reject(new Error('primary gone'))) };
  const workers = [new Authorizer(store, { ...options, failureLedger: ledger }), new Authorizer(store, { ...options, failureLedger: ledger })];
  t.teardown(() => [primary, ...workers].forEach((authorizer) => authorizer.close()));
  const attempt = async (authorizer: Authorizer, key = generateKey().key, address = '203.0.113.5') => {
    try {
      await authorizer.request({ host: 'a.example', headers: { authorization: `Bearer ${key}` }, socket: { remoteAddress: address } }, { method: 'object.read' });
      return 200;
    } catch (error) {
      return (error as AuthorizationError).statusCode;
    }
  };
  const statuses = [];
  for (let i = 0; i < 12; i++) statuses.push(await attempt(workers[i % 2]!));
  t.same(statuses, [...Array<number>(10).fill(403), 429, 429], 'ten failures spread over two workers spend the one allowance');
  t.equal(await attempt(primary), 429, "and the primary's own requests share it");
  t.equal(await attempt(workers[0]!, adminA), 200, 'a valid key still passes');
  t.throws(() => primary.reportedFailure({ address: 42 }), /a failure report is \{ address: string \}/, 'a malformed report is refused');
  reachable = false;
  const alone = [];
  for (let i = 0; i < 11; i++) alone.push(await attempt(workers[1]!, generateKey().key, '198.51.100.7'));
  t.same(alone, [...Array<number>(10).fill(403), 429], 'without its ledger a process still limits, on its own count');
});

t.test('IPv6 clients are counted per /64', async (t) => {
  const { outcome } = setup();
  for (let i = 0; i < 10; i++) t.equal(await outcome(`2001:db8:1:2::${i + 1}`, { key: generateKey().key }), '403 forbidden');
  t.equal(await outcome('2001:db8:1:2:ffff::9', { key: generateKey().key }), '429 too_many_requests 2');
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
  t.equal(answered, '429 too_many_requests 20', 'after 500 ms, with the time until the next failure is allowed (it was charged: two refills)');

  const request = { host: 'a.example', headers: { authorization: `Bearer ${generateKey().key}` }, socket: { remoteAddress: '203.0.113.5' } };
  const flood = Array.from({ length: 1_000 }, () => authorizer.request(request, { method: 'status' }).catch((error: AuthorizationError) => error.statusCode));
  await settle();
  t.equal(await outcome('203.0.113.5', { key: generateKey().key }), '429 too_many_requests 20', 'past 1,000 held, a 429 is answered at once');
  clock.advance(500);
  t.same(new Set(await Promise.all(flood)), new Set([429]), 'the held ones are answered when their time is up');
});

/** The same store, with every read of a `keys` or `organizations` record taking `ms` on `clock`: a far store. */
function slowStore(clock: FakeClock, ms: number) {
  return new Proxy(store, {
    get(target, property) {
      if (property !== 'collection') {
        const value = Reflect.get(target, property, target);
        return typeof value === 'function' ? value.bind(target) : value;
      }
      return (name: string) => {
        const collection = target.collection(name);
        if (name !== 'keys' && name !== 'organizations') return collection;
        return new Proxy(collection, {
          get(inner, method) {
            const value = Reflect.get(inner, method, inner);
            if (method !== 'findOne' || typeof value !== 'function') return typeof value === 'function' ? value.bind(inner) : value;
            return async (...args: unknown[]) => {
              const found = await value.apply(inner, args);
              await new Promise<void>((resolve) => clock.setTimeout(resolve, ms));
              return found;
            };
          },
        });
      };
    },
  });
}

t.test('a refusal is answered refusalFloorMs after its request arrived, however long its lookups took; a 429 delayMs after it', async (t) => {
  const clock = new FakeClock(Date.now());
  // Every uncached record takes 3 ms to read; a refusal is answered 5 ms after it arrived.
  const authorizer = new Authorizer(slowStore(clock, 3), { clock, failureLimit: { max: 3, windowMs: 60_000, delayMs: 500 }, refusalFloorMs: 5 });
  t.teardown(() => authorizer.close());
  const answeredAfter = async (credential: { key?: string; host?: string }, address = '203.0.113.5') => {
    const headers: Record<string, string> = credential.key ? { authorization: `Bearer ${credential.key}` } : {};
    const started = clock.now();
    let answer: string | undefined;
    const pending = authorizer
      .request({ host: credential.host ?? 'a.example', headers, socket: { remoteAddress: address } }, { method: 'object.read' })
      .then(
        () => (answer = '200'),
        (error: AuthorizationError) => (answer = `${error.statusCode} ${error.code}`),
      );
    while (answer === undefined) {
      await settle();
      if (answer === undefined) clock.advance(1);
    }
    await pending;
    return `${answer} after ${clock.now() - started} ms`;
  };
  t.equal(await answeredAfter({ key: adminA }), '200 after 9 ms', 'a valid key is never held (its host, key and platform organization read: 3 ms each)');
  t.equal(await answeredAfter({ key: `${idOf(adminA)}.${generateKey().secret}` }), '403 forbidden after 5 ms', 'a wrong secret for a cached key: nothing read');
  t.equal(await answeredAfter({ key: generateKey().key }), '403 forbidden after 5 ms', 'an unknown key id: one read');
  t.equal(await answeredAfter({ key: adminA, host: 'nowhere.example' }), '403 forbidden after 5 ms', 'an unknown host: one read');
  t.equal(await answeredAfter({ key: generateKey().key }), '429 too_many_requests after 500 ms', 'past the limit: delayMs after it arrived');
  t.equal(await answeredAfter({ key: `${idOf(adminA)}.${generateKey().secret}` }), '429 too_many_requests after 500 ms', 'whatever failed');
  t.equal(await answeredAfter({ key: adminA, host: `h${Date.now()}.example` }), '429 too_many_requests after 500 ms', 'an unknown host too');
  t.equal(await answeredAfter({ key: adminA }), '200 after 0 ms', 'a valid key from the limited address passes at once');
  t.equal(await answeredAfter({ key: readerA }, '198.51.100.7').then((answer) => answer.startsWith('200')), true);
  t.equal(await answeredAfter({}, '198.51.100.7'), '403 forbidden after 5 ms', 'a request without a key that its host does not allow');
});
