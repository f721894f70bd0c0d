import t from 'tap';
import fc from 'fast-check';
import { StorageError } from '../../src/storage/errors.js';
import { MAX_VALUE_BYTES, checkKey, toStoredValue, type JsonValue } from '../../src/storage/json-value.js';

function rejection(value: unknown): StorageError {
  try {
    toStoredValue(value);
  } catch (error) {
    if (error instanceof StorageError) return error;
    throw error;
  }
  throw new Error(`accepted ${String(value)}`);
}

t.test('JSON values are accepted and stored as an equal copy detached from the caller', async (t) => {
  const original = { name: 'a', list: [1, 2.5, -3, 'x', true, false, null, { deep: [[]] }], empty: {}, unicode: 'é😀' };
  const stored = toStoredValue(original);
  t.same(stored, original);
  t.not(stored, original, 'a copy, not the caller object');
  original.list.push(99);
  t.equal((stored as { list: unknown[] }).list.length, 8, 'later changes by the caller do not reach the stored value');
});

t.test('any value fast-check builds as JSON is accepted and survives unchanged', async () => {
  const noProtoKey = (value: unknown): boolean => !JSON.stringify(value).includes('"__proto__"');
  fc.assert(
    fc.property(fc.jsonValue().filter(noProtoKey), (value) => {
      const stored = toStoredValue(value);
      if (JSON.stringify(stored) !== JSON.stringify(value)) throw new Error(`changed: ${JSON.stringify(value)}`);
    }),
  );
});

t.test('stored values are deeply frozen', async (t) => {
  const stored = toStoredValue({ outer: { inner: [1, { leaf: 1 }] } }) as { outer: { inner: [number, { leaf: number }] } };
  t.ok(Object.isFrozen(stored) && Object.isFrozen(stored.outer) && Object.isFrozen(stored.outer.inner) && Object.isFrozen(stored.outer.inner[1]));
  t.throws(() => {
    stored.outer.inner[1].leaf = 2;
  }, TypeError);
});

t.test('-0 is stored as 0, as JSON writes it', async (t) => {
  t.ok(Object.is(toStoredValue(-0), 0));
});

t.test('non-JSON values are rejected with E_STORAGE_VALUE_NOT_JSON naming where and what', async (t) => {
  const cycle: Record<string, unknown> = { a: 1 };
  cycle.self = cycle;
  const sparse = [1, , 3];
  const withExtra = Object.assign([1, 2], { extra: true });
  const cases: Array<[string, unknown, RegExp]> = [
    ['function', () => 1, /at \$ is a function/],
    ['nested function', { a: { b: [0, () => 1] } }, /at \$\.a\.b\[1\] is a function/],
    ['BigInt', { n: 10n }, /at \$\.n is a BigInt/],
    ['symbol value', Symbol('s'), /is a symbol/],
    ['undefined', undefined, /at \$ is undefined/],
    ['undefined property', { a: undefined }, /at \$\.a is undefined/],
    ['cycle', cycle, /at \$\.self refers to an object that contains it/],
    ['NaN', { x: NaN }, /is NaN/],
    ['Infinity', [Infinity], /is Infinity/],
    ['Map', new Map([[1, 2]]), /is a Map/],
    ['Date', { at: new Date(0) }, /at \$\.at is a Date/],
    ['class instance', new (class Point {})(), /is a Point/],
    ['boxed string', new String('s'), /is a String/],
    ['Buffer', Buffer.from('x'), /is a Buffer/],
    ['sparse array', sparse, /empty slot at index 1/],
    ['array with extra properties', withExtra, /properties besides its elements/],
    ['symbol key', { [Symbol('k')]: 1 }, /symbol key/],
    ['accessor', Object.defineProperty({}, 'x', { get: () => 1, enumerable: true }), /accessor property "x"/],
    ['non-enumerable property', Object.defineProperty({}, 'hidden', { value: 1 }), /non-enumerable property "hidden"/],
    ['__proto__ key', JSON.parse('{"__proto__": {"admin": true}}'), /"__proto__" key/],
    ['odd key in the path', { 'a b': () => 1 }, /at \$\["a b"\] is a function/],
  ];
  for (const [name, value, message] of cases) {
    const error = rejection(value);
    t.equal(error.code, 'E_STORAGE_VALUE_NOT_JSON', name);
    t.match(error.message, message, name);
    t.match(error.message, /values must be JSON/, `${name}: says what is allowed`);
  }
});

t.test('shared (acyclic) references are JSON and accepted', async (t) => {
  const shared = { x: 1 };
  t.same(toStoredValue({ a: shared, b: shared }), { a: { x: 1 }, b: { x: 1 } });
});

t.test('values nested deeper than 100 levels are rejected with E_STORAGE_VALUE_TOO_DEEP', async (t) => {
  const nest = (depth: number): JsonValue => (depth === 0 ? 0 : [nest(depth - 1)]);
  t.doesNotThrow(() => toStoredValue(nest(100)));
  t.equal(rejection(nest(101)).code, 'E_STORAGE_VALUE_TOO_DEEP');
  t.equal(rejection(JSON.parse('['.repeat(100_000) + ']'.repeat(100_000))).code, 'E_STORAGE_VALUE_TOO_DEEP', 'no stack overflow on hostile nesting');
});

t.test('a value of exactly 256 KiB serialized is accepted; one byte more is E_STORAGE_VALUE_TOO_LARGE', async (t) => {
  const exact = 'x'.repeat(MAX_VALUE_BYTES - 2); // the quotes make up the rest
  t.equal(toStoredValue(exact), exact);
  const error = rejection(`${exact}x`);
  t.equal(error.code, 'E_STORAGE_VALUE_TOO_LARGE');
  t.match(error.message, /262145 bytes serialized; the limit is 262144/);
  t.equal(rejection('é'.repeat(MAX_VALUE_BYTES / 2)).code, 'E_STORAGE_VALUE_TOO_LARGE', 'counted in UTF-8 bytes, not characters');
});

t.test('keys: a non-empty string of at most 256 characters', async (t) => {
  t.doesNotThrow(() => checkKey('k'));
  t.doesNotThrow(() => checkKey('k'.repeat(256)));
  const codeOf = (key: unknown) => {
    try {
      checkKey(key);
      return 'accepted';
    } catch (error) {
      return (error as StorageError).code;
    }
  };
  t.equal(codeOf('k'.repeat(257)), 'E_STORAGE_KEY_TOO_LONG');
  t.equal(codeOf(''), 'E_STORAGE_KEY_INVALID');
  t.equal(codeOf(42), 'E_STORAGE_KEY_INVALID');
  t.equal(codeOf(undefined), 'E_STORAGE_KEY_INVALID');
});
