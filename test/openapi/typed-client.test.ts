import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import createClient from 'openapi-fetch';
import openapiTS, { astToString } from 'openapi-typescript';
import { Counter, Registry } from 'prom-client';
import ts from 'typescript';
import t from 'tap';
import { buildApp } from '../../app.js';
import { standInServer } from '../helpers/route-context.js';
import { loadConfig } from '../../src/config/load.js';
import { key, organization, tempDir, testStore } from '../auth/fixtures/tenants.js';
import { Authorizer } from '../../src/auth/authorize.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const DOCUMENT = JSON.parse(readFileSync(path.join(ROOT, 'openapi', 'openapi.json'), 'utf8'));

/**
 * A program written against the generated types, as a user of the document would write it. The type
 * assertions fail to compile when the document declares the wrong content type, body or header; the
 * `@ts-expect-error` lines fail when the types are too loose to catch a wrong call.
 */
const USAGE = `
import type createClient from 'openapi-fetch';
import type { paths } from './schema.js';

type Equal<A, B> = (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false;
type Responses<P extends keyof paths, M extends keyof paths[P]> = paths[P][M] extends { responses: infer R } ? R : never;
type Crud = Responses<'/crud', 'post'>;

export const promised = {
  metricsIsText: true satisfies Equal<keyof Responses<'/metrics', 'get'>[200]['content'], 'text/plain'>,
  metricsBodyIsString: true satisfies Equal<Responses<'/metrics', 'get'>[200]['content']['text/plain'], string>,
  docsIsHtml: true satisfies Equal<keyof Responses<'/docs', 'get'>[200]['content'], 'text/html'>,
  upgradeHasNoBody: true satisfies Equal<NonNullable<Responses<'/ws', 'get'>[101]['content']>, never>,
  redirectHasNoBody: true satisfies Equal<NonNullable<Crud[307]['content']>, never>,
  redirectHasLocation: true satisfies Equal<NonNullable<Crud[307]['headers']['Location']>, string>,
  methodNotAllowedHasAllow: true satisfies Equal<NonNullable<Crud[405]['headers']['Allow']>, 'POST'>,
  limitedHasRetryAfter: true satisfies Equal<NonNullable<Crud[429]['headers']['Retry-After']>, number>,
  unavailableHasRetryAfter: true satisfies Equal<NonNullable<Crud[503]['headers']['Retry-After']>, number>,
  notCached: true satisfies Equal<NonNullable<Crud[200]['headers']['Cache-Control']>, 'no-store'>,
};

export function wrongCalls(client: ReturnType<typeof createClient<paths>>) {
  // @ts-expect-error: no such CRUD method
  void client.POST('/crud', { body: { method: 'object.drop', collection: 'notes' } });
  // @ts-expect-error: /control is POSTed
  void client.GET('/control');
  // @ts-expect-error: the worker is a number
  void client.POST('/control', { body: { method: 'status', worker: 'one' } });
}

export async function exercise(create: typeof createClient, baseUrl: string, key: string) {
  const client = create<paths>({ baseUrl, headers: { authorization: 'Bearer ' + key } });
  const created = await client.POST('/crud', { body: { method: 'object.create', collection: 'notes', documents: [{ title: 'hello' }] } });
  const insertedIds: string[] | undefined = created.data?.insertedIds;
  const read = await client.POST('/crud', { body: { method: 'object.read', collection: 'notes', filter: { title: 'hello' } } });
  const documents: Array<Record<string, unknown>> | undefined = read.data?.documents;
  const status = await client.POST('/control', { body: { method: 'status', master: true } });
  const replies = status.data?.replies.map((reply) => ({ server: reply.server satisfies string, worker: reply.worker satisfies number, ok: reply.ok satisfies boolean, result: reply.result }));
  const missing: number | undefined = status.data?.missing.length;
  const metrics = await client.GET('/metrics', { parseAs: 'text' });
  const text: string | undefined = metrics.data;
  const refused = await client.POST('/crud', { body: { method: 'object.read', collection: 'notes' }, headers: { authorization: 'Bearer not-a-key' } });
  const code: string | undefined = refused.error?.error.code;
  return {
    insertedIds,
    documents,
    control: { status: status.response.status, replies, missing, cacheControl: status.response.headers.get('cache-control') },
    metrics: { status: metrics.response.status, contentType: metrics.response.headers.get('content-type'), text },
    refused: { status: refused.response.status, code },
  };
}
`;

type Exercised = {
  insertedIds?: string[];
  documents?: Array<Record<string, unknown>>;
  control: { status: number; replies?: Array<{ server: string; worker: number; ok: boolean; result: unknown }>; missing?: number; cacheControl: string | null };
  metrics: { status: number; contentType: string | null; text?: string };
  refused: { status: number; code?: string };
};

/** Type-checks the program against the generated types; the compiler's complaints, one line each. */
function typeErrors(dir: string): string[] {
  const options: ts.CompilerOptions = {
    strict: true,
    noEmit: true,
    target: ts.ScriptTarget.ES2022,
    module: ts.ModuleKind.ESNext,
    moduleResolution: ts.ModuleResolutionKind.Bundler,
    lib: ['lib.es2022.d.ts', 'lib.dom.d.ts'],
    types: [],
    skipLibCheck: true,
    paths: { 'openapi-fetch': [path.join(ROOT, 'node_modules', 'openapi-fetch', 'dist', 'index.d.mts')] },
  };
  const program = ts.createProgram([path.join(dir, 'usage.ts')], options);
  return ts.getPreEmitDiagnostics(program).map((diagnostic) => {
    const where = diagnostic.file ? `${path.basename(diagnostic.file.fileName)}:${diagnostic.file.getLineAndCharacterOfPosition(diagnostic.start ?? 0).line + 1}` : '';
    return `${where} ${ts.flattenDiagnosticMessageText(diagnostic.messageText, '\n')}`;
  });
}

t.test('a client generated from openapi/openapi.json type-checks and calls /crud, /control and /metrics of a real app', async (t) => {
  const dir = mkdtempSync(path.join(tmpdir(), 'fleetplane-typed-client-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  writeFileSync(path.join(dir, 'schema.ts'), astToString(await openapiTS(DOCUMENT)));
  writeFileSync(path.join(dir, 'usage.ts'), USAGE);
  t.same(typeErrors(dir), [], 'the generated types fit the program: content types, headers, bodies');
  const compiled = ts.transpileModule(USAGE, { compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022 } }).outputText;
  writeFileSync(path.join(dir, 'usage.mjs'), compiled);
  const usage = (await import(pathToFileURL(path.join(dir, 'usage.mjs')).href)) as { exercise: (create: typeof createClient, baseUrl: string, key: string) => Promise<Exercised> };

  const store = await testStore();
  t.teardown(() => store.close());
  const local = await organization(store, { name: 'local', hosts: ['127.0.0.1'] });
  const admin = await key(store, { organizationId: local._id, name: 'admin', admin: true });
  const registry = new Registry();
  new Counter({ name: 'fleetplane_connections_handed_total', help: 'Connections handed to workers', registers: [registry] }).inc(3);
  const routed: unknown[] = [];
  const server = standInServer(loadConfig({ env: {}, object: { dataDir: tempDir() } }).config, {
    id: 'srv-a',
    metricsText: () => registry.metrics(),
    db: store,
    authorize: new Authorizer(store),
    // What the control route hands on, answered as one worker answers `status`.
    request: async (envelope: unknown) => {
      routed.push(envelope);
      return { id: 'request-1', replies: [{ server: 'srv-a', worker: 1, ok: true, result: { status: 'ready' } }], missing: [] };
    },
  });
  const { app } = await buildApp({ server, logger: false });
  t.teardown(() => app.close());
  await app.listen({ port: 0, host: '127.0.0.1' });
  const base = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;

  const result = await usage.exercise(createClient, base, admin);
  t.equal(result.insertedIds?.length, 1, 'object.create answered its id');
  t.same(result.documents?.map((document) => [document._id, document.title]), [[result.insertedIds?.[0], 'hello']], 'object.read returned the document');
  t.same(result.control, { status: 200, replies: [{ server: 'srv-a', worker: 1, ok: true, result: { status: 'ready' } }], missing: 0, cacheControl: 'no-store' });
  t.match(routed, [{ method: 'status', master: true }], 'the control route handed on the status envelope');
  t.equal(result.metrics.status, 200);
  t.match(result.metrics.contentType, /^text\/plain/);
  t.match(result.metrics.text, /^fleetplane_connections_handed_total 3$/m, 'the Prometheus text, read as text');
  t.same(result.refused, { status: 403, code: 'malformed_key' }, 'an error body is typed and read as the error shape');
});
