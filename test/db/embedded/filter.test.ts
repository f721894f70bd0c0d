import { Query } from 'mingo';
import t from 'tap';
import { compileFilter } from '../../../src/db/embedded/filter.js';

const stored: unknown[] = [null, 0, -0, 1, 1.5, '', '1', 'a', 'A', 'true', 'null', true, false, [], [1], ['1'], [null], [[1]], [true], {}, { v: 1 }, [{}]];
const wanted: unknown[] = [null, 0, -0, 1, 1.5, '', '1', 'a', 'A', 'true', 'null', true, false];

t.test('scalar equality filters match exactly the documents the full query language matches', async (t) => {
  let compared = 0;
  for (const expected of wanted) {
    for (const actual of [undefined, ...stored]) {
      const document: Record<string, unknown> = actual === undefined ? { _id: 'd', other: 'x' } : { _id: 'd', other: 'x', v: actual };
      for (const filter of [{ v: expected }, { _id: 'd', v: expected }, { v: expected, other: 'x' }, { v: expected, other: 'y' }]) {
        const label = `${JSON.stringify(filter)} on ${JSON.stringify(document)}`;
        t.equal(compileFilter(filter)!(document), new Query(filter, {}).test(document), label);
        compared += 1;
      }
    }
  }
  t.ok(compared > 1000);
});

t.test('inherited property names count as missing fields, as in the query language', async (t) => {
  for (const field of ['constructor', 'toString', 'hasOwnProperty', 'valueOf']) {
    t.equal(compileFilter({ [field]: null })!({ _id: 'd' }), true, `${field}: null on a document without it`);
    t.equal(compileFilter({ [field]: 'a' })!({ _id: 'd' }), false, `${field}: "a" on a document without it`);
  }
});

t.test('operators, dotted paths and non-scalar values keep their full semantics', async (t) => {
  const document = { _id: 'd', age: 30, address: { city: 'Paris' }, tags: ['a', 'b'] };
  t.equal(compileFilter({ age: { $gt: 20 } })!(document), true);
  t.equal(compileFilter({ 'address.city': 'Paris' })!(document), true);
  t.equal(compileFilter({ address: { city: 'Paris' } })!(document), true);
  t.equal(compileFilter({ tags: ['a', 'b'] })!(document), true);
  t.equal(compileFilter({ _id: 'd', $or: [{ age: 1 }, { tags: 'b' }] })!(document), true);
  t.equal(compileFilter({}), undefined);
  t.throws(() => compileFilter({ age: { $nope: 1 } }), { name: 'InvalidInputError' });
});
