import t from 'tap';
import fc from 'fast-check';
import { isPermitted } from '../../src/auth/permissions.js';
import { oracleAllows } from './fixtures/permission-oracle.js';

const segment = fc.constantFrom('object', 'read', 'workflow', 'deploy', 'post', 'status', 'constructor');
const method = fc.array(segment, { minLength: 1, maxLength: 3 }).map((parts) => parts.join('.'));
const scalar = fc.constantFrom<string | number | boolean | null>('apis', 'keys', 's1', 's2', 'eu', 1, 2, true, null);
const allowed = fc.oneof(scalar, fc.array(scalar, { maxLength: 3 }));
const field = fc.constantFrom('api', 'endpoint', 'server', 'worker', 'collection');
const restriction = fc.record(
  {
    fields: fc.dictionary(field, allowed, { maxKeys: 2 }),
    data: fc.option(fc.dictionary(fc.constantFrom('region', 'size.class', 'size'), allowed, { maxKeys: 2 }), { nil: undefined }),
  },
  { requiredKeys: ['fields'] },
).map(({ fields, data }) => (data ? { ...fields, data } : fields));
const permissions = fc.dictionary(fc.oneof(method, fc.constant('*')), fc.oneof(fc.boolean(), restriction), { maxKeys: 4 });
const targetValue = fc.oneof(scalar, fc.array(scalar, { maxLength: 3 }), fc.constant({ $in: ['apis'] }));
const envelope = fc.record(
  {
    method,
    api: targetValue,
    endpoint: targetValue,
    server: targetValue,
    worker: targetValue,
    collection: targetValue,
    data: fc.oneof(fc.record({ region: targetValue, size: fc.oneof(targetValue, fc.record({ class: targetValue })) }, { requiredKeys: [] }), fc.anything()),
  },
  { requiredKeys: ['method'] },
);
const subject = fc.record({ admin: fc.oneof(fc.constant(false), fc.constant(false), fc.constant(true)), permissions, defaults: fc.option(permissions, { nil: undefined }) });

t.test('the evaluator never grants what the naive oracle refuses', async (t) => {
  let granted = 0;
  let grantedByRules = 0;
  let refused = 0;
  fc.assert(
    fc.property(subject, envelope, (who, request) => {
      const result = isPermitted(who, request);
      if (result) granted += 1;
      if (result && !who.admin) grantedByRules += 1;
      else refused += 1;
      return !result || oracleAllows(who, request);
    }),
    { numRuns: 5_000 },
  );
  t.ok(granted > 500, `grants were exercised (${granted})`);
  t.ok(grantedByRules > 300, `grants by permission entries, not admin, were exercised (${grantedByRules})`);
  t.ok(refused > 500, `refusals were exercised (${refused})`);
});

t.test('the evaluator never throws, whatever the permissions and the envelope hold', async (t) => {
  fc.assert(
    fc.property(fc.anything(), fc.anything(), fc.anything(), fc.string(), (permissionsValue, defaults, extra, name) => {
      const result = isPermitted({ admin: false, permissions: permissionsValue as never, defaults: defaults as never }, { method: name, data: extra, server: extra });
      return typeof result === 'boolean';
    }),
    { numRuns: 3_000 },
  );
  t.pass('no input made it throw');
});
