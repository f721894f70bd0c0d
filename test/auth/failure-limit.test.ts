import t from 'tap';
import { FailureLimiter } from '../../src/auth/failure-limit.js';
import { FakeClock } from '../helpers/fake-clock.js';

const limiter = (options: { max?: number; windowMs?: number; maxAddresses?: number } = {}) => {
  const clock = new FakeClock(1_000_000);
  return { clock, limiter: new FailureLimiter({ max: 20, windowMs: 10_000, ...options, clock }) };
};

/** Failures of `address` until one is refused (and charged); returns how many were allowed. */
const allowedFailures = (subject: FailureLimiter, address: string, upTo = 1_000) => {
  for (let allowed = 0; allowed < upTo; allowed++) if (subject.fail(address) > 0) return allowed;
  return upTo;
};

t.test('an address may fail max times; the next failure is refused with the time until one more is allowed', async (t) => {
  const { limiter: subject } = limiter();
  t.equal(subject.retryAfterMs('203.0.113.5'), 0, 'an address that never failed is not limited');
  t.equal(allowedFailures(subject, '203.0.113.5'), 20);
  t.equal(subject.retryAfterMs('203.0.113.5'), 1_000, 'the refused failure was charged: two refills of windowMs / max away');
  t.equal(subject.fail('203.0.113.5'), 1_500, 'each failure past the limit pushes the time one refill further out');
  t.equal(subject.retryAfterMs('203.0.113.5'), 1_500);
});

t.test('an address that keeps failing stays limited, however slowly it tries; the debt is bounded by max', async (t) => {
  const { clock, limiter: subject } = limiter();
  allowedFailures(subject, '203.0.113.5');
  // One failure per refill interval, more than any interval apart: still never allowed.
  for (let attempt = 0; attempt < 100; attempt++) {
    clock.advance(500);
    t.ok(subject.fail('203.0.113.5') > 0, `attempt ${attempt} refused`);
  }
  for (let attempt = 0; attempt < 1_000; attempt++) subject.fail('203.0.113.5');
  t.equal(subject.retryAfterMs('203.0.113.5'), 10_500, 'at most max + 1 refills away (the allowance goes no lower than -max)');
  clock.advance(10_500);
  t.equal(subject.retryAfterMs('203.0.113.5'), 0, 'after that, quiet, it may fail again');
});

t.test('the allowance refills with time: one failure per windowMs / max, all of them after windowMs', async (t) => {
  const { clock, limiter: subject } = limiter();
  allowedFailures(subject, '203.0.113.5');
  clock.advance(999);
  t.equal(subject.retryAfterMs('203.0.113.5'), 1, 'not yet');
  clock.advance(1);
  t.equal(subject.retryAfterMs('203.0.113.5'), 0, 'after two refills (the refused failure was charged) the address may fail once more');
  t.equal(allowedFailures(subject, '203.0.113.5'), 1);
  clock.advance(10_500);
  t.equal(allowedFailures(subject, '203.0.113.5'), 20, 'after a whole window (and the charged refusal), the whole allowance');
  // Many small steps add up exactly: 500 steps of 2 ms are two failures' worth, one of them the charged refusal.
  for (let step = 0; step < 500; step++) clock.advance(2);
  t.equal(allowedFailures(subject, '203.0.113.5'), 1);
});

t.test('addresses are counted apart', async (t) => {
  const { limiter: subject } = limiter();
  allowedFailures(subject, '203.0.113.5');
  t.ok(subject.retryAfterMs('203.0.113.5') > 0);
  t.equal(subject.retryAfterMs('198.51.100.7'), 0);
  t.equal(allowedFailures(subject, '198.51.100.7'), 20);
});

t.test('memory is bounded: past maxAddresses the address that failed least recently is forgotten', async (t) => {
  const { limiter: subject } = limiter({ maxAddresses: 100 });
  allowedFailures(subject, 'attacker');
  for (let i = 0; i < 10_000; i++) {
    subject.fail(`rotating-${i}`);
    // The attacker keeps trying: an address that is refused stays remembered.
    if (i % 50 === 0) t.ok(subject.retryAfterMs('attacker') > 0 || i === 0);
  }
  t.equal(subject.size, 100, 'never more than maxAddresses entries');
  t.ok(subject.retryAfterMs('attacker') > 0, 'the active attacker is still limited');
  t.equal(subject.retryAfterMs('rotating-0'), 0, 'the oldest rotating addresses were forgotten');
});

t.test('key ids that authenticated from a failing address are remembered, a few per address', async (t) => {
  const { limiter: subject } = limiter();
  subject.succeeded('203.0.113.5', 'fpk_a');
  t.notOk(subject.verified('203.0.113.5', 'fpk_a'), 'nothing is tracked for an address that never failed');
  subject.fail('203.0.113.5');
  for (const id of ['fpk_a', 'fpk_b', 'fpk_c', 'fpk_d', 'fpk_e']) subject.succeeded('203.0.113.5', id);
  t.ok(subject.verified('203.0.113.5', 'fpk_e'));
  t.ok(subject.verified('203.0.113.5', 'fpk_b'));
  t.notOk(subject.verified('203.0.113.5', 'fpk_a'), 'the oldest of more than four is dropped');
  t.notOk(subject.verified('198.51.100.7', 'fpk_e'), 'per address');
});

t.test('max 0 turns the limit off', async (t) => {
  const { limiter: subject } = limiter({ max: 0 });
  t.equal(allowedFailures(subject, '203.0.113.5', 5_000), 5_000);
  t.equal(subject.size, 0, 'and tracks nothing');
});

t.test("a process's view follows the ledger's answers", async (t) => {
  const { clock, limiter: view } = limiter();
  view.observe('203.0.113.5', 0);
  t.equal(view.size, 1, 'an address that failed is tracked');
  t.equal(view.retryAfterMs('203.0.113.5'), 0, 'within its allowance, not limited');
  view.observe('203.0.113.5', 1_500);
  t.equal(view.retryAfterMs('203.0.113.5'), 1_500, 'limited for as long as the ledger said');
  clock.advance(1_500);
  t.equal(view.retryAfterMs('203.0.113.5'), 0);
  view.observe('203.0.113.5', 60_000);
  t.equal(view.retryAfterMs('203.0.113.5'), 10_500, 'never further out than the ledger itself can be');
});
