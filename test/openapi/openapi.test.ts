import { readFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import SwaggerParser from '@apidevtools/swagger-parser';
import type { OpenAPIV3_1 } from 'openapi-types';
import t from 'tap';
import { generateOpenApi } from '../../cli/openapi.js';
import { automationApp } from '../api/fixtures/app.js';
import { errorReply } from '../../schemas/errors.js';

const COMMITTED = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', 'openapi', 'openapi.json');
const text = await generateOpenApi();
const document = JSON.parse(text) as OpenAPIV3_1.Document;

/** SPEC 9.3's routes (the manager's aside) and the dashboard's, with the security each one takes. */
const ROUTES: Array<[method: string, path: string, security: unknown[]]> = [
  ['post', '/api', [{ bearer: [] }]],
  ['post', '/api/{path}', [{ bearer: [] }]],
  ['post', '/workflows/{name}', [{ bearer: [] }]],
  ['post', '/webhooks/{path}', []],
  ['post', '/crud', [{ bearer: [] }]],
  ['post', '/manager', [{ bearer: [] }]],
  ['post', '/manager/{path}', [{ bearer: [] }]],
  ['post', '/control', [{ bearer: [] }]],
  ['get', '/ws', [{ bearer: [] }, {}]],
  ['get', '/healthz', []],
  ['get', '/readyz', []],
  ['get', '/metrics', [{ bearer: [] }]],
  ['get', '/docs', []],
  ['get', '/openapi.json', []],
  ['get', '/dashboard', []],
  ['get', '/dashboard/assets/{version}/{path}', []],
];

t.test('the generated document passes the OpenAPI validator', async (t) => {
  const validated = await SwaggerParser.validate(structuredClone(document) as never);
  t.equal((validated as OpenAPIV3_1.Document).openapi, '3.1.0');
  t.same(document.components?.securitySchemes?.bearer, { type: 'http', scheme: 'bearer', bearerFormat: 'fpk_<key id>.<secret>', description: 'A Fleetplane key (`fleetplane keys create`)' });
});

t.test('every route is listed with its security, tags and a summary; nothing else is', async (t) => {
  const listed = Object.entries(document.paths ?? {}).flatMap(([route, operations]) => Object.keys(operations ?? {}).map((method) => `${method} ${route}`));
  t.same(listed.sort(), ROUTES.map(([method, route]) => `${method} ${route}`).sort(), 'no 405 helpers, HEAD routes or UI assets');
  for (const [method, route, security] of ROUTES) {
    const operation = (document.paths![route] as Record<string, OpenAPIV3_1.OperationObject>)[method]!;
    t.same(operation.security, security, `${method} ${route} security`);
    t.ok(operation.tags?.length, `${method} ${route} has a tag`);
    t.ok(operation.summary, `${method} ${route} has a summary`);
  }
  const api = (document.paths!['/api'] as Record<string, OpenAPIV3_1.OperationObject>).post!;
  const body = api.requestBody as OpenAPIV3_1.RequestBodyObject;
  t.ok(body.content['application/json']!.example ?? body.content['application/json']!.examples, 'request examples are included');
});

t.test('every route documents a 400 in the error shape: a duplicated Host or Authorization header is refused on any route', async (t) => {
  for (const [method, route] of ROUTES) {
    const operation = (document.paths![route] as Record<string, OpenAPIV3_1.OperationObject>)[method]!;
    const refused = operation.responses?.['400'] as OpenAPIV3_1.ResponseObject | undefined;
    const schema = refused?.content?.['application/json']?.schema as OpenAPIV3_1.SchemaObject | undefined;
    t.same(schema?.required, ['error'], `${method} ${route}`);
    t.same((schema?.properties?.error as OpenAPIV3_1.SchemaObject | undefined)?.required, ['code', 'message'], `${method} ${route}: code and message`);
  }
});

t.test('the document is deterministic and the committed openapi/openapi.json is current', async (t) => {
  t.equal(await generateOpenApi(), text, 'two generations are byte-identical');
  t.notMatch(text, /\d{4}-\d{2}-\d{2}T\d{2}:\d{2}/, 'no timestamps');
  t.equal(readFileSync(COMMITTED, 'utf8'), text, 'run "npm run openapi" after changing a route schema');
});

t.test('a worker serves the same document at /openapi.json, and /docs with its assets', async (t) => {
  const fixture = await automationApp();
  t.teardown(() => fixture.close());
  await fixture.app.listen({ port: 0, host: '127.0.0.1' });
  const base = `http://127.0.0.1:${(fixture.app.server.address() as AddressInfo).port}`;
  const served = await fetch(`${base}/openapi.json`);
  t.equal(served.status, 200);
  t.same(await served.json(), document);
  const page = await fetch(`${base}/docs`);
  t.equal(page.status, 200);
  t.match(page.headers.get('content-type'), /^text\/html/);
  const html = await page.text();
  const assets = [...html.matchAll(/(?:src|href)="([^"]+\.(?:js|css))"/g)].map((match) => new URL(match[1]!, `${base}/docs`).href);
  t.ok(assets.some((asset) => asset.endsWith('.js')) && assets.some((asset) => asset.endsWith('.css')), 'the page references scripts and styles');
  for (const asset of assets) {
    const reply = await fetch(asset);
    t.equal(reply.status, 200, asset);
    t.match(reply.headers.get('content-type'), asset.endsWith('.js') ? /javascript/ : /text\/css/);
    t.ok((await reply.arrayBuffer()).byteLength > 0);
  }
});

type Operation = OpenAPIV3_1.OperationObject;
type Response = OpenAPIV3_1.ResponseObject;
const operations = ROUTES.map(([method, route]) => [`${method} ${route}`, (document.paths![route] as Record<string, Operation>)[method]!] as const);
const responsesOf = (operation: Operation) => Object.entries(operation.responses ?? {}) as Array<[string, Response]>;
/** Routes the node answers itself even while it serves nothing else. */
const ALWAYS_SERVED = new Set(['get /healthz', 'get /readyz', 'get /metrics', 'post /control']);
const ENVELOPE_ROUTES = ROUTES.filter(([method]) => method === 'post').map(([method, route]) => `${method} ${route}`);

t.test('every operation has a unique operationId and a description; every response says what it means', async (t) => {
  const ids = operations.map(([, operation]) => operation.operationId);
  t.ok(ids.every((id) => typeof id === 'string' && /^[a-z][A-Za-z]+$/.test(id)), 'camelCase operation ids');
  t.equal(new Set(ids).size, ids.length, 'no two operations share an id');
  for (const [name, operation] of operations) {
    t.ok((operation.description ?? '').length > 40, `${name} is described`);
    for (const [status, response] of responsesOf(operation)) t.notMatch(response.description, /^(Default Response|)$/, `${name} ${status}`);
  }
  t.notMatch(text, /Default Response/);
});

t.test('responses without JSON declare what they carry: text for metrics, HTML for the docs, nothing for 101 and 307', async (t) => {
  const response = (route: string, method: string, status: string) => (document.paths![route] as Record<string, Operation>)[method]!.responses![status] as Response;
  t.same(Object.keys(response('/metrics', 'get', '200').content ?? {}), ['text/plain']);
  t.same(Object.keys(response('/docs', 'get', '200').content ?? {}), ['text/html']);
  t.equal(response('/ws', 'get', '101').content, undefined);
  for (const [name, operation] of operations) {
    const redirect = operation.responses?.['307'] as Response | undefined;
    if (redirect) t.equal(redirect.content, undefined, `${name} 307 has no body`);
  }
});

t.test('the fallback 307 and 503 are declared where the fallback can answer, with their headers; never on probes, metrics or /control', async (t) => {
  for (const [name, operation] of operations) {
    const redirect = operation.responses?.['307'] as Response | undefined;
    const unavailable = operation.responses?.['503'] as Response | undefined;
    if (ALWAYS_SERVED.has(name)) {
      t.equal(redirect, undefined, `${name} is never redirected`);
      continue;
    }
    t.ok(redirect?.headers?.Location, `${name} 307 with Location`);
    t.ok(unavailable?.headers?.['Retry-After'], `${name} 503 with Retry-After`);
    const examples = Object.keys(unavailable?.content?.['application/json']?.examples ?? {});
    t.ok(examples.includes('no_worker_serving') && examples.includes('organization_shed'), `${name} 503 shows both fallback answers`);
  }
});

t.test('envelope routes declare Cache-Control on every answer, Allow on 405, 415, and Retry-After on 429', async (t) => {
  for (const name of ENVELOPE_ROUTES) {
    const operation = operations.find(([candidate]) => candidate === name)![1];
    for (const [status, response] of responsesOf(operation)) t.ok(response.headers?.['Cache-Control'], `${name} ${status} Cache-Control`);
    t.ok((operation.responses?.['405'] as Response).headers?.Allow, `${name} 405 Allow`);
    t.ok(operation.responses?.['415'], `${name} 415`);
    const limited = operation.responses?.['429'] as Response | undefined;
    if (limited) t.ok(limited.headers?.['Retry-After'], `${name} 429 Retry-After`);
  }
  t.ok(operations.find(([name]) => name === 'post /control')![1].responses?.['429'], '/control takes a key, so it can answer 429');
});

t.test('every error status has examples in the error shape, named by their code (the fallback\'s by what happened)', async (t) => {
  for (const [name, operation] of operations) {
    for (const [status, response] of responsesOf(operation)) {
      const json = response.content?.['application/json'];
      if (Number(status) < 400 || !json) continue;
      const examples = Object.entries(json.examples ?? {}) as Array<[string, OpenAPIV3_1.ExampleObject]>;
      if (name === 'get /readyz' && status === '503') continue; // a probe's answer, not an error
      t.ok(examples.length > 0, `${name} ${status} has examples`);
      for (const [exampleName, example] of examples) {
        const { code } = (example.value as { error: { code: string } }).error;
        const expected = code === 'unavailable' ? /^(unavailable(_\d+)?|no_worker_serving|organization_shed)$/ : new RegExp(`^${code}(_\\d+)?$`);
        t.match(exampleName, expected, `${name} ${status} ${exampleName}`);
        const declared = Object.keys(((json.schema as OpenAPIV3_1.SchemaObject).properties?.error as OpenAPIV3_1.SchemaObject | undefined)?.properties ?? {});
        const answered = Object.keys((example.value as { error: Record<string, unknown> }).error);
        t.same(answered.filter((field) => !declared.includes(field)), [], `${name} ${status} ${exampleName}: every field of the example's error is in the schema`);
      }
    }
  }
  const crudForbidden = Object.keys(((document.paths!['/crud'] as Record<string, Operation>).post!.responses!['403'] as Response).content!['application/json']!.examples!);
  t.ok(crudForbidden.includes('permission_denied'), 'the codes are those the route answers with');
});

t.test('the document cites nothing users do not have, and carries the license and servers', async (t) => {
  t.notMatch(text, /\bSPEC\b/);
  const pkg = JSON.parse(readFileSync(path.resolve(path.dirname(COMMITTED), '..', 'package.json'), 'utf8')) as { license: string };
  t.same(document.info.license, { name: pkg.license, identifier: pkg.license });
  t.same(document.servers?.map((server) => server.url), ['/'], 'relative to where the document is served, by default');
  const configured = JSON.parse(await generateOpenApi({ server: { publicUrl: 'https://fleet.example.com/' } })) as OpenAPIV3_1.Document;
  t.same(configured.servers?.map((server) => server.url), ['https://fleet.example.com'], 'server.publicUrl when configured');
});

t.test('an error reply declares the fields its examples add to code and message, and refuses one it cannot describe', async (t) => {
  const declared = errorReply('upstream', { code: 'upstream_failed', message: 'provider "p" answered 500', upstreamStatus: 500 });
  t.same(Object.keys(declared.properties.error.properties), ['code', 'message', 'upstreamStatus']);
  t.notOk(declared.properties.error.required?.includes('upstreamStatus' as never), 'optional: other codes of the same status do not carry it');
  t.throws(() => errorReply('odd', { code: 'x', message: 'y', secret: 'z' }), /error\.secret, which the error shape does not describe/);
});
