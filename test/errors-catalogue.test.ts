import { readFileSync } from 'node:fs';
import t from 'tap';
import { API_ERRORS } from '../src/api/errors.js';
import { AUTH_ERRORS } from '../src/auth/errors.js';
import { CRUD_ERRORS } from '../src/crud/errors.js';
import { STORE_CODES } from '../src/db/errors.js';
import { FleetplaneError, SHARED_CODES, type ErrorCode, type ErrorEntry } from '../src/errors.js';
import { IPC_CODES } from '../src/ipc/envelope.js';
import { MANAGER_ERRORS } from '../src/manager/errors.js';
import { SECRET_CODES } from '../src/secrets/errors.js';
import { STORAGE_CODES } from '../src/storage/errors.js';
import { WEBHOOK_ERRORS } from '../src/webhooks/errors.js';
import { WORKFLOW_ERRORS } from '../src/workflows/errors.js';

type AnyEntry = ErrorEntry<unknown[], FleetplaneError>;

/** The folders' catalogues of entries (code, status and message template). */
const CATALOGUES: Record<string, Record<string, AnyEntry>> = {
  api: API_ERRORS as unknown as Record<string, AnyEntry>,
  auth: AUTH_ERRORS as unknown as Record<string, AnyEntry>,
  crud: CRUD_ERRORS as unknown as Record<string, AnyEntry>,
  manager: MANAGER_ERRORS as unknown as Record<string, AnyEntry>,
  webhooks: WEBHOOK_ERRORS as unknown as Record<string, AnyEntry>,
  workflows: WORKFLOW_ERRORS as unknown as Record<string, AnyEntry>,
};
/** The folders whose classes are their message templates, and the shared codes: declarations only. */
const DECLARATIONS: Record<string, Record<string, ErrorCode>> = { shared: SHARED_CODES, db: STORE_CODES, ipc: IPC_CODES, secrets: SECRET_CODES, storage: STORAGE_CODES };

/** Arguments for any template: strings and numbers are all the templates take. */
const ARGUMENTS = ['a', 'b', 'c', 'd'];

/** Every declaration of a code, by code, with where it is used. */
function declarationsByCode() {
  const byCode = new Map<string, Array<{ where: string; declaration: ErrorCode }>>();
  const add = (where: string, declaration: ErrorCode) => byCode.set(declaration.code, [...(byCode.get(declaration.code) ?? []), { where, declaration }]);
  for (const [folder, catalogue] of Object.entries(CATALOGUES)) for (const [name, entry] of Object.entries(catalogue)) add(`${folder}.${name}`, entry.declaration);
  for (const [folder, declarations] of Object.entries(DECLARATIONS)) for (const [name, declaration] of Object.entries(declarations)) add(`${folder}.${name}`, declaration);
  return byCode;
}

t.test('each code is declared once, with one status, whichever folders answer with it', async (t) => {
  for (const [code, uses] of declarationsByCode()) {
    const declarations = new Set(uses.map((use) => use.declaration));
    t.equal(declarations.size, 1, `${code}: one declaration (${uses.map((use) => use.where).join(', ')})`);
    t.ok([...declarations].every((declaration) => Number.isInteger(declaration.statusCode) && declaration.statusCode >= 400 && declaration.statusCode < 600), `${code}: an HTTP error status`);
  }
});

t.test('a catalogue names each of its codes once', async (t) => {
  for (const [folder, catalogue] of Object.entries(CATALOGUES)) {
    const codes = Object.values(catalogue).map((entry) => entry.code);
    t.same([...new Set(codes)], codes, folder);
  }
});

t.test('an entry throws its code with its status, and its example is what the thrown error answers', async (t) => {
  for (const [folder, catalogue] of Object.entries(CATALOGUES)) {
    for (const [name, entry] of Object.entries(catalogue)) {
      const error = entry(...ARGUMENTS);
      t.ok(error instanceof FleetplaneError, `${folder}.${name}: a domain error`);
      t.equal(error.code, entry.declaration.code, `${folder}.${name}: code`);
      t.equal(error.statusCode, entry.declaration.statusCode, `${folder}.${name}: status`);
      t.same([entry.code, entry.statusCode], [entry.declaration.code, entry.declaration.statusCode], `${folder}.${name}: the entry reads as its declaration`);
      const example = entry.example(...ARGUMENTS);
      t.same(example, error.toBody().error, `${folder}.${name}: example`);
      t.type(example.message, 'string');
      t.ok(example.message.length > 0, `${folder}.${name}: a message`);
      // A 4xx (or an exposed 5xx) answers with its own message; an unexposed one would be answered "internal".
      t.ok(error.expose, `${folder}.${name}: what it answers is what the example shows`);
    }
  }
});

t.test("the OpenAPI document's error examples answer with their code's status", async (t) => {
  const document = JSON.parse(readFileSync(new URL('../openapi/openapi.json', import.meta.url), 'utf8')) as {
    paths: Record<string, Record<string, { responses?: Record<string, { content?: Record<string, { examples?: Record<string, { value?: { error?: { code?: string } } }> }> }> }>>;
  };
  const statusOf = new Map([...declarationsByCode()].map(([code, uses]) => [code, uses[0]!.declaration.statusCode]));
  let checked = 0;
  for (const [path, operations] of Object.entries(document.paths)) {
    // `/control` answers with the IPC layer's codes (src/ipc/envelope.ts), which have their own table.
    if (path === '/control') continue;
    for (const [method, operation] of Object.entries(operations)) {
      for (const [status, response] of Object.entries(operation.responses ?? {})) {
        for (const examples of Object.values(response.content ?? {})) {
          for (const [name, example] of Object.entries(examples.examples ?? {})) {
            const code = example.value?.error?.code;
            if (code === undefined || !statusOf.has(code)) continue;
            checked++;
            t.equal(String(statusOf.get(code)), status, `${method.toUpperCase()} ${path} ${status} ${name}`);
          }
        }
      }
    }
  }
  t.ok(checked > 50, `${checked} examples checked`);
});

t.test('workflows: a failure keeps its code and status wherever it is seen from', async (t) => {
  const nested = WORKFLOW_ERRORS.stepFailed('provider "items" answered 500').atStep('boom').atStep('inner');
  const ofInput = nested.within('input 1: ', nested.step);
  t.same(ofInput.toBody(), { error: { code: 'step_failed', message: 'input 1: step "inner" → step "boom": provider "items" answered 500', step: 'inner' } });
  t.equal(ofInput.statusCode, 502);
  t.same(WORKFLOW_ERRORS.missingReference('input.id').toBody(), { error: { code: 'missing_reference', message: '${input.id} has no value' } });
  t.equal(WORKFLOW_ERRORS.missingReference('input.id').statusCode, 400, "the caller's input lacks a value");
  t.equal(WORKFLOW_ERRORS.missingStepValue('steps.a.id').statusCode, 422, "an earlier step's result lacks a value: the definition's");
});

t.test('an error built from an entry keeps its cause for the log, out of the answer', async (t) => {
  const cause = new Error('ECONNREFUSED');
  const error = MANAGER_ERRORS.parentUnreachable().withCause(cause);
  t.equal(error.cause, cause);
  t.notOk(Object.keys(error).includes('cause'), 'not enumerable, as a constructor cause is');
  t.same(error.toBody(), { error: { code: 'parent_unreachable', message: 'the manager could not be reached' } });
});

t.test('API entries carry what the upstream answered', async (t) => {
  t.same(API_ERRORS.upstreamFailed.example('items', 500), { code: 'upstream_failed', message: 'provider "items" answered 500', upstreamStatus: 500 });
  t.same(API_ERRORS.upstreamUnreachable.example('items'), { code: 'upstream_unreachable', message: 'provider "items" could not be reached' });
  t.same(API_ERRORS.upstreamUnreachable.example('items', 200), { code: 'upstream_unreachable', message: 'provider "items" broke off its reply', upstreamStatus: 200 });
  t.equal(API_ERRORS.upstreamTimeout('items', 5000).timeoutMs, 5000);
  t.same(AUTH_ERRORS.tooManyRequests(30).headers, { 'retry-after': '30' });
});
