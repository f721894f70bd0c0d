import { readFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import SwaggerParser from '@apidevtools/swagger-parser';
import type { OpenAPIV3_1 } from 'openapi-types';
import t from 'tap';
import { generateOpenApi } from '../../cli/openapi.js';
import { automationApp } from '../api/fixtures/app.js';

const COMMITTED = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', 'openapi', 'openapi.json');
const text = await generateOpenApi();
const document = JSON.parse(text) as OpenAPIV3_1.Document;

/** SPEC 9.3's routes (the manager's aside) with the security each one takes. */
const ROUTES: Array<[method: string, path: string, security: unknown[]]> = [
  ['post', '/api', [{ bearer: [] }]],
  ['post', '/api/{path}', [{ bearer: [] }]],
  ['post', '/workflows/{name}', [{ bearer: [] }]],
  ['post', '/webhooks/{path}', []],
  ['post', '/crud', [{ bearer: [] }]],
  ['post', '/control', [{ bearer: [] }]],
  ['get', '/ws', [{ bearer: [] }, {}]],
  ['get', '/healthz', []],
  ['get', '/readyz', []],
  ['get', '/metrics', [{ bearer: [] }]],
  ['get', '/docs', []],
  ['get', '/openapi.json', []],
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
