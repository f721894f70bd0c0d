import t from 'tap';
import { update as mingoUpdate } from 'mingo/updater';
import { plainSet } from '../../src/db/plain-set.js';
import { applyUpdate } from '../../src/db/updates.js';
import type { Update } from '../../src/db/types.js';

type Doc = Record<string, unknown>;

const clone = (value: Doc): Doc => JSON.parse(JSON.stringify(value)) as Doc;

const documents: Doc[] = [
  {},
  { _id: 's1' },
  { _id: 's1', cluster_id: 'c', master: { status: 'running', pid: 1, ip: { public: '1.2.3.4' } } },
  { _id: 's1', master: {}, workers: { '1': { pid: 2 } }, tags: ['a', 'b'], n: 0, f: null, deep: { a: { b: { c: [1, { d: 2 }] } } } },
];

const values: unknown[] = ['running', 'stopped', '', 0, -0, 1, 1.5, true, false, null, [], ['a', 'b'], ['b', 'a'], {}, { public: '1.2.3.4' }, { private: '10.0.0.1', public: '1.2.3.4' }, { a: { b: [1, { d: 2 }] } }];
const paths = ['status', 'master', 'master.status', 'master.pid', 'master.ip', 'master.ip.public', 'cluster_id', 'workers.w1', 'deep.a.b', 'deep.a.x.y', 'n', 'f_new', 'tags', 'new.nested.field'];

/** What mingo's `$set` does to a copy of the document: the document after it, and whether a field changed. */
function byMingo(document: Doc, update: Doc | Update): { document: Doc; changed: boolean } {
  const copy = clone(document);
  return { changed: mingoUpdate(copy, update).length > 0, document: copy };
}

t.test('a $set of field paths into plain records gives what mingo gives: the same document and the same answer', async (t) => {
  let compared = 0;
  for (const document of documents) {
    for (const path of paths) {
      for (const value of values) {
        const update = { $set: { [path]: value } };
        const expected = byMingo(document, update);
        const copy = clone(document);
        const changed = plainSet(copy, update);
        if (changed === undefined) continue;
        const what = `${JSON.stringify(document)} ${JSON.stringify(update)}`;
        t.equal(changed, expected.changed, what);
        // JSON text compares key order too.
        t.equal(JSON.stringify(copy), JSON.stringify(expected.document), what);
        compared += 1;
      }
    }
  }
  // Several paths at once, in order, creating records on the way.
  for (const document of documents) {
    const update = { $set: { cluster_id: 'c2', 'master.status': 'running', 'master.pid': 7, 'master.ip': { public: '5.6.7.8' }, 'new.a.b': 1, 'new.a.c': [1] } };
    const expected = byMingo(document, update);
    const copy = clone(document);
    t.equal(plainSet(copy, update), expected.changed);
    t.equal(JSON.stringify(copy), JSON.stringify(expected.document));
    compared += 1;
  }
  t.ok(compared > 700, `${compared} updates compared`);
});

t.test('the value set is a copy one level deep, as mingo makes it', async (t) => {
  const nested = { x: 1 };
  const value = { inner: nested, list: [nested] };
  const document: Doc = {};
  t.equal(plainSet(document, { $set: { v: value, l: value.list } }), true);
  t.not(document.v, value);
  t.equal((document.v as Doc).inner, nested);
  t.not(document.l, value.list);
  t.equal((document.l as unknown[])[0], nested);
});

t.test('anything else is left to mingo', async (t) => {
  const document = { _id: 's1', tags: ['a'], master: { status: 'running' }, text: 'x', constructor_like: { constructor: 1 } };
  const others: Doc[] = [
    { $inc: { n: 1 } },
    { $set: { a: 1 }, $unset: { b: '' } },
    { $set: { 'tags.0': 'b' } },
    { $set: { 'tags.$': 'b' } },
    { $set: { 'tags.$[]': 'b' } },
    { $set: { _id: 'other' } },
    { $set: { '_id.x': 1 } },
    { $set: { master: {}, 'master.status': 'x' } },
    { $set: { 'master.status': 'x', master: {} } },
    { $set: { 'a..b': 1 } },
    { $set: { 'a.': 1 } },
    JSON.parse('{"$set":{"__proto__":{"polluted":true}}}') as Doc,
    { $set: { 'toString.x': 1 } },
    { $set: { constructor: 1 } },
    { $set: { 'constructor_like.x': 1 } },
    { $set: { 'text.x': 1 } },
    { $set: { when: new Date(0) } },
    { $set: { v: undefined } },
    { $set: { v: { constructor: 'x' } } },
    { $set: { v: Object.create(null) as Doc } },
  ];
  for (const update of others) {
    const copy = clone(document);
    t.equal(plainSet(copy, update), undefined, JSON.stringify(update) ?? String(update));
    t.same(copy, clone(document), 'untouched');
  }
  t.equal(plainSet({ tags: { constructor: 1 } }, { $set: { 'tags.x': 1 } }), undefined, 'through a record shadowing an inherited name');
  t.equal(plainSet(Object.assign(Object.create(null) as Doc, { a: 1 }), { $set: { a: 2 } }), undefined, 'into a record without a prototype');
});

t.test('applyUpdate answers as before for updates the fast path takes and for those it leaves', async (t) => {
  const cases: Array<[Doc, Update]> = [
    [{ _id: 's', master: { status: 'running' } }, { $set: { 'master.status': 'running' } }],
    [{ _id: 's', master: { status: 'running' } }, { $set: { 'master.status': 'stopped', cluster_id: 'c' } }],
    [{ _id: 's', tags: ['a'] }, { $set: { 'tags.0': 'b' } }],
    [{ _id: 's', n: 1 }, { $inc: { n: 2 } }],
  ];
  for (const [document, update] of cases) {
    const expected = byMingo(document, update);
    const copy = clone(document);
    t.equal(applyUpdate(copy, update), expected.changed, JSON.stringify(update));
    t.same(copy, expected.document);
  }
  t.throws(() => applyUpdate({ _id: 's', master: {} }, { $set: { master: {}, 'master.status': 'x' } }), /invalid update/);
  t.throws(() => applyUpdate({ _id: 's' }, { $set: { _id: 'x' } }), /invalid update/);
});
