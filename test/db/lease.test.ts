import path from 'node:path';
import t from 'tap';
import { EmbeddedStore } from '../../src/db/embedded/store.js';
import { StoreUnavailableError } from '../../src/db/errors.js';
import { LEASES_COLLECTION, StoreLease, type LeaseClock } from '../../src/db/lease.js';
import type { Store } from '../../src/db/types.js';
import { cuttableStore } from '../helpers/cuttable-store.js';
import { FakeClock } from '../helpers/fake-clock.js';
import { tempDir } from '../helpers/server-process.js';

const TTL = 3_000;
const SKEW = 500;

const store = await EmbeddedStore.open(path.join(tempDir('fleetplane-lease-'), 'store.db'));
t.teardown(() => store.close());
let names = 0;

/** Holders of one lease over the shared store, each with its own clock (they may differ: skew). */
function lease(owner: string, clock: LeaseClock, name: string, over: Pick<Store, 'collection'> = store): StoreLease {
  return new StoreLease({ store: over, name, owner, ttlMs: TTL, maxClockSkewMs: SKEW, clock });
}
const fresh = () => `test:${names++}`;
const stored = (name: string) => store.collection(LEASES_COLLECTION).findOne({ _id: name });

/** A clock `offsetMs` ahead of (or behind) another: the same instant, read on another host. */
const offset = (clock: FakeClock, offsetMs: number): LeaseClock => ({ now: () => clock.now() + offsetMs, setTimeout: (fn, ms) => clock.setTimeout(fn, ms) });

t.test('the first taker holds it; a second cannot take it while it is held; the holder renews past its first expiry', async (t) => {
  const clock = new FakeClock(1_000_000);
  const name = fresh();
  const a = lease('a', clock, name);
  const b = lease('b', clock, name);
  t.equal(await a.acquire(), true);
  t.equal(a.term(), 1);
  t.equal(await b.acquire(), false, 'held by a');
  t.equal(b.held(), false);
  t.match(await b.read(), { owner: 'a', term: 1, expiresAt: clock.now() + TTL }, 'anyone may read who holds it');
  t.notOk('token' in ((await b.read()) ?? {}), 'but never its token');
  clock.advance(TTL - 1);
  t.equal(await a.acquire(), true, 'renewed before expiry');
  clock.advance(TTL - 1);
  t.equal(a.held(), true, 'still held past the first expiry');
  t.equal(await b.acquire(), false);
  t.equal(a.term(), 1, 'a renewal keeps the term');
});

t.test('a holder that stops renewing holds until its own expiry; another takes over only once it expired maxClockSkewMs ago', async (t) => {
  const clock = new FakeClock(1_000_000);
  const name = fresh();
  const a = lease('a', clock, name);
  const b = lease('b', clock, name);
  const lost: string[] = [];
  a.onLost(() => lost.push('a'));
  await a.acquire();
  t.equal(await a.record({ lastActionAt: 42 }), true);
  clock.advance(TTL - 1);
  t.equal(a.held(), true);
  clock.advance(1);
  t.equal(a.held(), false, 'its own expiry reached: it stops acting, renewed or not');
  clock.advance(SKEW - 1);
  t.equal(await b.acquire(), false, 'not before the skew margin passed');
  clock.advance(1);
  t.equal(await b.acquire(), true, 'taken over');
  t.equal(b.term(), 2, 'a new term');
  t.same(b.data(), { lastActionAt: 42 }, "the new holder reads what the last one recorded");
  t.equal(await a.acquire(), false, "the old holder's late renewal finds it taken");
  t.same(lost, ['a'], 'and it hears of the loss');
  t.match(await stored(name), { owner: 'b', term: 2 });
});

t.test('a fenced write: only the holder records, and a holder that lost the lease is refused at once', async (t) => {
  const clock = new FakeClock(1_000_000);
  const name = fresh();
  const a = lease('a', clock, name);
  const b = lease('b', clock, name);
  t.equal(await b.record({ lastActionAt: 1 }), false, 'not held: nothing written');
  await a.acquire();
  // b takes the lease while a believes it still holds it (a's renewal never reached the store).
  await store.collection(LEASES_COLLECTION).updateOne({ _id: name }, { $set: { expiresAt: clock.now() - SKEW } });
  t.equal(await b.acquire(), true);
  t.equal(a.held(), true, 'a has not heard yet');
  let lost = 0;
  a.onLost(() => lost++);
  t.equal(await a.record({ lastActionAt: 2 }), false, "a's write is refused: the token in the store is b's");
  t.equal(a.held(), false, 'a stops at once');
  t.equal(lost, 1);
  t.equal(await b.record({ lastActionAt: 3 }), true);
  t.match(await stored(name), { data: { lastActionAt: 3 } }, "only b's write is there");
});

t.test('release lets another take the lease at once', async (t) => {
  const clock = new FakeClock(1_000_000);
  const name = fresh();
  const a = lease('a', clock, name);
  const b = lease('b', clock, name);
  await a.acquire();
  await a.release();
  t.equal(a.held(), false);
  t.equal(await b.acquire(), true, 'no wait for the expiry');
  await a.release();
  t.match(await stored(name), { owner: 'b' }, "releasing a lease one does not hold changes nothing");
});

t.test('clock skew up to maxClockSkewMs: a taker whose clock runs ahead never takes the lease while the holder believes it holds', async (t) => {
  const clock = new FakeClock(1_000_000);
  const name = fresh();
  const holder = lease('slow', clock, name);
  const ahead = lease('fast', offset(clock, SKEW - 1), name);
  await holder.acquire();
  for (let step = 0; step < TTL + SKEW; step += 50) {
    clock.advance(50);
    const took = await ahead.acquire();
    t.notOk(took && holder.held(), `never both at +${step + 50} ms`);
    if (took) break;
  }
  t.equal(ahead.held(), true, 'taken once the holder had stopped');
  t.equal(holder.held(), false);
});

t.test('a store error proves nothing: the holder keeps its own expiry, hears of no loss, and the next renewal works', async (t) => {
  const clock = new FakeClock(1_000_000);
  const name = fresh();
  let failing = false;
  const flaky: Pick<Store, 'collection'> = {
    collection: <T extends { _id: string }>(collectionName: string) => {
      const real = store.collection<T & Record<string, unknown>>(collectionName);
      return new Proxy(real, {
        get: (target, property, receiver) => {
          const value = Reflect.get(target, property, receiver) as unknown;
          if (typeof value !== 'function') return value;
          return (...args: unknown[]) => (failing ? Promise.reject(new StoreUnavailableError('the store is down')) : (value as (...a: unknown[]) => unknown).apply(target, args));
        },
      }) as never;
    },
  };
  const a = lease('a', clock, name, flaky);
  let lost = 0;
  a.onLost(() => lost++);
  await a.acquire();
  clock.advance(TTL / 3);
  failing = true;
  await t.rejects(a.acquire(), /the store is down/);
  t.equal(a.held(), true, 'held until the expiry it wrote');
  t.equal(lost, 0);
  failing = false;
  t.equal(await a.acquire(), true);
  clock.advance(TTL - 1);
  t.equal(a.held(), true, 'renewed from the later write');
});

t.test('a take whose answer was lost is adopted on the next attempt, not waited out', async (t) => {
  const clock = new FakeClock(1_000_000);
  const name = fresh();
  let loseAnswer = true;
  const lossy: Pick<Store, 'collection'> = {
    collection: <T extends { _id: string }>(collectionName: string) => {
      const real = store.collection<T & Record<string, unknown>>(collectionName);
      return Object.assign(Object.create(real) as object, {
        insertOne: async (document: Record<string, unknown>) => {
          const result = await real.insertOne(document);
          if (loseAnswer) throw new StoreUnavailableError('the answer was lost');
          return result;
        },
      }) as never;
    },
  };
  const a = lease('a', clock, name, lossy);
  await t.rejects(a.acquire(), /the answer was lost/);
  t.equal(a.held(), false, 'no answer, no hold');
  loseAnswer = false;
  t.equal(await a.acquire(), true, 'its own token found in the store: renewed, held');
  t.equal(a.term(), 1);
});

t.test('calls made while an attempt runs share it; keep() renews every third of the TTL and releases when no longer eligible', async (t) => {
  const clock = new FakeClock(1_000_000);
  const name = fresh();
  const a = lease('a', clock, name);
  const [first, second] = await Promise.all([a.acquire(), a.acquire()]);
  t.same([first, second], [true, true]);
  let eligible = true;
  const errors: unknown[] = [];
  const stop = a.keep({ eligible: () => eligible, onError: (error) => errors.push(error) });
  t.teardown(stop);
  for (let round = 0; round < 10; round++) await clock.advanceAsync(TTL / 3);
  t.equal(a.held(), true, 'kept for ten rounds, three TTLs');
  t.ok(((await stored(name))?.expiresAt as number) > clock.now(), 'the stored expiry is ahead');
  eligible = false;
  await clock.advanceAsync(TTL / 3);
  t.equal(a.held(), false, 'given up');
  t.match(await stored(name), { expiresAt: 0 });
  stop();
  eligible = true;
  await clock.advanceAsync(TTL);
  t.equal(a.held(), false, 'nothing after the stop');
  t.same(errors, []);
});

t.test('the lease is refused options that would make it meaningless', async (t) => {
  const clock = new FakeClock();
  t.throws(() => new StoreLease({ store, name: 'x', owner: 'a', ttlMs: 0, maxClockSkewMs: 0, clock }), RangeError);
  t.throws(() => new StoreLease({ store, name: 'x', owner: 'a', ttlMs: 1_000, maxClockSkewMs: -1, clock }), RangeError);
});

const cuttable = () => cuttableStore(store);

t.test('a holder cut from the store stops acting at its own expiry and hears of it; another takes over TTL + maxClockSkewMs after its last renewal', async (t) => {
  const clock = new FakeClock(1_000_000);
  const name = fresh();
  const link = cuttable();
  const a = lease('a', clock, name, link.store);
  const b = lease('b', clock, name);
  const losses: string[] = [];
  a.onLost((loss) => losses.push(loss));
  const stop = a.keep();
  t.teardown(stop);
  t.equal(await a.acquire(), true);
  const renewedAt = clock.now();
  link.cut();
  await clock.advanceAsync(TTL / 3);
  t.equal(a.held(), true, 'its renewal is under way, unanswered');
  await clock.advanceAsync(TTL - TTL / 3 - 1);
  t.equal(a.held(), true, 'held until its own expiry');
  t.same(losses, []);
  await clock.advanceAsync(1);
  t.equal(a.held(), false, 'its expiry reached with no renewal in the store: it stops, whatever the store says later');
  t.same(losses, ['expired'], 'and hears of it at that instant');
  t.equal(a.fence(), undefined, 'no fencing token any more');
  await clock.advanceAsync(SKEW - 1);
  t.equal(await b.acquire(), false, `not taken before TTL + maxClockSkewMs (${clock.now() - renewedAt} ms after the last renewal)`);
  await clock.advanceAsync(1);
  t.equal(await b.acquire(), true, `taken ${clock.now() - renewedAt} ms after the last renewal`);
  t.equal(b.term(), 2);
  link.restore();
  await clock.advanceAsync(TTL / 3);
  t.equal(a.held(), false, 'the late renewal, arriving now, finds the lease taken');
  t.match(await stored(name), { owner: 'b', term: 2 });
});

t.test('a holder whose expiry passed while the store did not answer takes its lease back in the same term when nobody took it', async (t) => {
  const clock = new FakeClock(1_000_000);
  const name = fresh();
  const link = cuttable();
  const a = lease('a', clock, name, link.store);
  await a.acquire();
  link.cut();
  clock.advance(TTL);
  t.equal(a.held(), false);
  link.restore();
  t.equal(await a.acquire(), true, 'its token is still in the store');
  t.equal(a.term(), 1, 'the same term: no one else held it in between');
});

t.test('a holder whose expiry passed unrenewed still clears its token on release, so the next holder does not wait out the skew', async (t) => {
  const clock = new FakeClock(1_000_000);
  const name = fresh();
  const link = cuttable();
  const a = lease('a', clock, name, link.store);
  const b = lease('b', clock, name);
  await a.acquire();
  link.cut();
  clock.advance(TTL);
  t.equal(a.held(), false);
  link.restore();
  await a.release();
  t.match(await stored(name), { owner: 'a', expiresAt: 0 });
  t.equal(await b.acquire(), true, 'taken at once');
});

t.test('fence() is the token of the held term; a refusal of that term stops the holder, an older one changes nothing', async (t) => {
  const clock = new FakeClock(1_000_000);
  const name = fresh();
  const a = lease('a', clock, name);
  const losses: string[] = [];
  a.onLost((loss) => losses.push(loss));
  t.equal(a.fence(), undefined, 'not held: no token');
  await a.acquire();
  t.same(a.fence(), { lease: name, term: 1 });
  a.refused({ lease: name, term: 0 });
  a.refused({ lease: 'another lease', term: 1 });
  t.equal(a.held(), true, "an older term's refusal, or another lease's, is not this holder's");
  a.refused({ lease: name, term: 1 });
  t.equal(a.held(), false, 'stopped at once');
  t.same(losses, ['refused']);
});

t.test('clock skew beyond maxClockSkewMs: a taker whose clock runs ahead takes the lease while the holder still believes it holds it; the holder\'s fenced write is refused', async (t) => {
  const clock = new FakeClock(1_000_000);
  const name = fresh();
  const link = cuttable();
  const holder = lease('behind', clock, name, link.store);
  const ahead = lease('ahead', offset(clock, SKEW + 2_000), name);
  const losses: string[] = [];
  holder.onLost((loss) => losses.push(loss));
  await holder.acquire();
  const holderExpiry = (await stored(name))!.expiresAt as number;
  link.cut();
  while (!(await ahead.acquire())) clock.advance(50);
  t.equal(ahead.term(), 2, 'taken');
  t.equal(holder.held(), true, `the holder still believes it holds the lease, ${holderExpiry - clock.now()} ms more on its clock`);
  link.restore();
  t.equal(await holder.record({ lastActionAt: 1 }), false, "its record is refused by the store: the lease holds the taker's token and term");
  t.equal(holder.held(), false, 'and it stops at once');
  t.same(losses, ['taken']);
  t.same((await stored(name))?.data, {}, "nothing of the old holder's in the lease");
});
