import t from 'tap';
import { CounterMirror, counterToken } from '../../src/db/change-feed.js';

const seeded = (rows: Array<[string, number]>) => {
  const mirror = new CounterMirror();
  mirror.seed(rows);
  mirror.live = true;
  return mirror;
};

t.test('a token built from heard counters equals one built from counters read in SQL', async (t) => {
  const mirror = seeded([['keys', 4]]);
  const read = new Map([['keys', 4]]);
  t.equal(mirror.token(['organizations', 'keys']), counterToken(['organizations', 'keys'], (name) => read.get(name) ?? 0));
  t.equal(mirror.token(['organizations', 'keys']), '0,4', 'a collection never written counts 0');
});

t.test('the mirror answers only while live, and never with a counter it has not heard or read', async (t) => {
  const mirror = new CounterMirror();
  t.equal(mirror.token(['keys']), undefined, 'not seeded, not live');
  mirror.seed([['keys', 1]]);
  t.equal(mirror.token(['keys']), undefined, 'seeded, not live');
  mirror.live = true;
  t.equal(mirror.token(['keys']), '1');
  mirror.wrote('keys');
  t.equal(mirror.token(['keys']), undefined, 'this process wrote without learning the new value: read the store');
  mirror.learn(['keys'], new Map([['keys', 2]]));
  t.equal(mirror.token(['keys']), '2');
  mirror.wrote('keys', 3);
  t.equal(mirror.token(['keys']), '3', 'a write that returned its counter is known at once');
  mirror.forget();
  t.equal(mirror.token(['keys']), undefined, 'a change the feed could not name: read the store');
});

t.test('counters only grow: an older value, heard late or read from an older snapshot, changes nothing', async (t) => {
  const mirror = seeded([['keys', 5]]);
  t.notOk(mirror.observe('keys', 4));
  t.notOk(mirror.observe('keys', 5));
  t.ok(mirror.observe('keys', 6), 'news');
  mirror.learn(['keys'], new Map([['keys', 5]]));
  t.equal(mirror.token(['keys']), '6');
});

t.test('seeding again after the feed was down names the collections written meanwhile; the first seeding names none', async (t) => {
  const mirror = new CounterMirror();
  t.same(mirror.seed([['keys', 2], ['apis', 1]]), [], 'nothing to re-validate at first');
  mirror.live = false;
  t.same(mirror.seed([['keys', 2], ['apis', 3], ['workflows', 1]]), ['apis', 'workflows']);
});

t.test('counters heard or read before the first seeding do not make it name collections', async (t) => {
  const mirror = new CounterMirror();
  mirror.observe('keys', 1);
  mirror.learn(['apis'], new Map([['apis', 2]]));
  t.same(mirror.seed([['keys', 2], ['apis', 3], ['workflows', 1]]), []);
});
