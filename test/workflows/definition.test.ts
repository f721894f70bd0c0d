import t from 'tap';
import { compileWorkflow, workflowViolation } from '../../src/workflows/definition.js';
import { compileTemplate } from '../../src/workflows/template.js';

t.test('an exact reference keeps its type; references inside text interpolate', async (t) => {
  const scope = { input: { id: 42, tags: ['a'], flag: false, nested: { x: 1 } }, steps: { create: { id: 'i-1', ok: true } } };
  const template = compileTemplate(
    { id: '${input.id}', tags: '${input.tags}', flag: '${input.flag}', first: '${input.tags.0}', all: '${steps.create}', text: 'Item ${input.id}: ${steps.create.id} ${input.nested}', plain: 7 },
    'data',
  );
  t.same(template(scope), { id: 42, tags: ['a'], flag: false, first: 'a', all: { id: 'i-1', ok: true }, text: 'Item 42: i-1 {"x":1}', plain: 7 });
  t.same(compileTemplate('${input}', 'data')(scope), scope.input, 'the whole input');
});

t.test('a reference to a missing value fails naming it; prototypes are out of reach', async (t) => {
  const missing = compileTemplate({ id: '${input.nope}' }, 'data');
  t.throws(() => missing({ input: {}, steps: {} }), { code: 'missing_reference', statusCode: 400, message: '${input.nope} has no value' });
  t.throws(() => compileTemplate('${input.constructor}', 'data')({ input: {}, steps: {} }), { code: 'missing_reference' });
  t.throws(() => compileTemplate('${steps.a.x}', 'data')({ input: {}, steps: { a: {} } }), { code: 'missing_step_value', statusCode: 422, message: '${steps.a.x} has no value' }, "a step's missing field is the definition's problem");
  const poisoned = compileTemplate(JSON.parse('{"__proto__": {"polluted": "${input.x}"}}'), 'data')({ input: { x: 1 }, steps: {} }) as Record<string, unknown>;
  t.equal(({} as Record<string, unknown>).polluted, undefined, 'Object.prototype untouched');
  t.same(Object.getOwnPropertyNames(poisoned), ['__proto__'], 'the key stays a plain field');
});

t.test('definitions are refused naming the field', async (t) => {
  const step = { name: 'create', api: 'items', endpoint: 'create', method: 'post' };
  t.equal(workflowViolation({ name: 'ok', steps: [step], output: { created: '${steps.create}' } }), undefined);
  const cases: Array<[unknown, RegExp]> = [
    [{ name: 'w', steps: [{ name: 'x' }] }, /^steps\.0: a step needs exactly one of "api", "workflow" or "ipc"/],
    [{ name: 'w', steps: [{ ...step, workflow: 'other' }] }, /^steps\.0: a step needs exactly one/],
    [{ name: 'w', steps: [{ ...step, method: 'fetch' }] }, /^steps\.0\.method/],
    [{ name: 'w', steps: [{ ...step, url: 'http://x' }] }, /^steps\.0\.url: unknown field/],
    [{ name: 'w', steps: [step, step] }, /^steps\.1\.name: "create" is used by an earlier step/],
    [{ name: 'w', steps: [{ ...step, data: { id: '${steps.later.id}' } }, { ...step, name: 'later' }] }, /^steps\.0: \$\{steps\.later\} is not an earlier step/],
    [{ name: 'w', steps: [step], output: '${steps.nope}' }, /^output: \$\{steps\.nope\} is not a step/],
    [{ name: 'w', steps: [{ ...step, data: 'x ${env.SECRET}' }] }, /^steps\.0\.data: "\$\{" must start a reference/],
    [{ name: 'w', steps: [{ name: 'i', ipc: { method: 'restart', broadcast: true } }] }, /^steps\.0\.ipc\.method: "restart" is an operator control/],
    [{ name: 'w', steps: [{ name: 'i', ipc: { method: 'storage.set' } }] }, /operator control/],
    [{ name: 'w', steps: [{ name: 'i', ipc: { method: 'overview.emit', data: { kind: 'crash' } } }] }, /^steps\.0\.ipc\.method: "overview\.emit" is internal: only the server's own processes send it/],
    [{ name: 'method', steps: [] }, /^name: "method" is reserved/],
    [{ name: 'has.dot', steps: [] }, /^name/],
    [{ name: 'w', steps: [], timeoutMs: 10 ** 9 }, /^timeoutMs/],
    [{ name: 'w', steps: [], extra: true }, /^extra: unknown field/],
  ];
  for (const [definition, message] of cases) t.match(workflowViolation(definition), message, JSON.stringify(definition));
  t.equal(compileWorkflow({ name: 'w', steps: [] }).timeoutMs, 30_000, 'default time bound');
});
