import t from 'tap';
import { IpcError, parseEnvelope, withDataAlias } from '../../src/ipc/envelope.js';

const refusal = (run: () => unknown): IpcError => {
  try {
    run();
  } catch (error) {
    if (error instanceof IpcError) return error;
    throw error;
  }
  throw new Error('not refused');
};

t.test("the design's cordon / drain / shed envelopes parse, with data taken from value and organizations", async (t) => {
  t.same(parseEnvelope({ method: 'cordon', server: 'srv-b', worker: 2, value: true }), { method: 'cordon', server: 'srv-b', worker: 2, value: true, data: true });
  t.same(parseEnvelope({ method: 'drain', server: 'srv-b', worker: 2, value: false }).data, false);
  t.same(parseEnvelope({ method: 'shed', server: 'srv-b', worker: 2, organizations: ['org_abc123'] }).data, ['org_abc123']);
  t.same(parseEnvelope({ method: 'shed', master: true, organizations: false }).data, false);
});

t.test('the data form is filled into the alias, so a restriction on either field sees the same argument', async (t) => {
  t.equal(parseEnvelope({ method: 'cordon', worker: 1, data: false }).value, false);
  t.equal(parseEnvelope({ method: 'cordon', worker: 1 }).value, true, 'no argument is true');
  t.equal(parseEnvelope({ method: 'drain', worker: 1, data: { value: false } }).value, false);
  t.same(parseEnvelope({ method: 'shed', master: true, data: ['a'] }).organizations, ['a']);
  t.same(parseEnvelope({ method: 'shed', master: true, data: { organizations: false } }).organizations, false);
  t.same(parseEnvelope({ method: 'status', master: true, data: true }), { method: 'status', master: true, data: true }, 'other methods are left as they are');
});

t.test('both given and equal is fine; both given and different is a 400 naming both fields, whatever the form', async (t) => {
  t.same(parseEnvelope({ method: 'cordon', worker: 1, value: true, data: true }).data, true);
  t.same(parseEnvelope({ method: 'cordon', worker: 1, value: false, data: { value: false } }).value, false);
  t.same(parseEnvelope({ method: 'shed', master: true, organizations: ['a', 'b'], data: ['b', 'a'] }).organizations, ['a', 'b'], 'the same organizations in another order');
  t.same(parseEnvelope({ method: 'shed', master: true, organizations: false, data: [] }).data, [], 'ending shedding either way');
  const cases: Array<[string, Record<string, unknown>, string]> = [
    ['cordon', { method: 'cordon', worker: 1, value: true, data: false }, 'value'],
    ['drain in the object form', { method: 'drain', worker: 1, value: true, data: { value: false } }, 'value'],
    ['cordon with data of no cordon form', { method: 'cordon', worker: 1, value: true, data: 'yes' }, 'value'],
    ['shed', { method: 'shed', master: true, organizations: ['a'], data: ['b'] }, 'organizations'],
    ['shed false against a list', { method: 'shed', master: true, organizations: false, data: ['a'] }, 'organizations'],
  ];
  for (const [name, envelope, field] of cases) {
    const error = refusal(() => parseEnvelope(envelope));
    t.equal(error.statusCode, 400, `${name}: 400`);
    t.equal(error.field, field, `${name}: the alias is the field`);
    t.match(error.message, new RegExp(`^${field} and data disagree`), `${name}: the message names both fields`);
  }
});

t.test('an alias on a method that does not take it, or of the wrong type, is refused', async (t) => {
  const value = refusal(() => parseEnvelope({ method: 'restart', master: true, value: true }));
  t.equal(value.code, 'invalid_envelope');
  t.match(value.message, /^value: only cordon and drain take value/);
  const organizations = refusal(() => parseEnvelope({ method: 'cordon', worker: 1, organizations: ['a'] }));
  t.match(organizations.message, /^organizations: only shed takes organizations/);
  t.equal(refusal(() => parseEnvelope({ method: 'cordon', worker: 1, value: 'yes' })).field, 'value');
  t.equal(refusal(() => parseEnvelope({ method: 'shed', master: true, organizations: 'org-1' })).code, 'invalid_envelope');
  t.same(withDataAlias({ method: 'cordon', value: 'yes' }), { method: 'cordon', value: 'yes' }, 'before the schema, a mistyped alias is left for it to name');
});
