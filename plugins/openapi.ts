import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import fp from 'fastify-plugin';
import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import { Type } from '@sinclair/typebox';
import type { FastifyPluginAsync, FastifySchema, RouteOptions } from 'fastify';

const PUBLIC: FastifySchema['security'] = [];
const BEARER = [{ bearer: [] }];

const TAGS = [
  { name: 'api', description: 'Calls to API providers (SPEC 10)' },
  { name: 'control', description: 'IPC control envelopes and the WebSocket (SPEC 5, 9)' },
  { name: 'data', description: 'CRUD envelopes on the organization’s collections (SPEC 7.3)' },
  { name: 'docs', description: 'This document and its UI' },
  { name: 'probes', description: 'Health, readiness and metrics' },
  { name: 'webhooks', description: 'Signed deliveries that run workflows (SPEC 12)' },
  { name: 'workflows', description: 'Workflow runs (SPEC 11)' },
];

/** The package version, found from this file whether it runs from source or from dist/. */
function packageVersion(): string {
  for (let dir = path.dirname(fileURLToPath(import.meta.url)); dir !== path.dirname(dir); dir = path.dirname(dir)) {
    try {
      const pkg = JSON.parse(readFileSync(path.join(dir, 'package.json'), 'utf8')) as { name?: string; version?: string };
      if (pkg.name === 'fleetplane' && pkg.version) return pkg.version;
    } catch {
      // not here: go up
    }
  }
  return '0.0.0';
}

type DeclaredSchema = FastifySchema & { hide?: boolean; params?: { properties?: Record<string, unknown> } };

/**
 * Every route can answer 400: the request guard refuses a duplicated `Host` or `Authorization` header before
 * any route runs, so that answer is declared here, once, for the routes that declare no 400 of their own.
 */
const DUPLICATE_HEADER_REPLY = Type.Object(
  {
    error: Type.Object({
      code: Type.String({ examples: ['duplicate_header'] }),
      message: Type.String({ examples: ['the Host header may appear only once'] }),
    }),
  },
  { description: 'Bad request: `duplicate_header` when the request has more than one `Host` or `Authorization` header' },
);

/**
 * Every route that takes a key can answer 429 (SPEC 8.7): an address past its failed-authentication limit gets
 * it, with `Retry-After`, whatever the route. Declared here, once, for the routes that declare none.
 */
const TOO_MANY_FAILURES_REPLY = Type.Object(
  {
    error: Type.Object({
      code: Type.String({ examples: ['too_many_requests'] }),
      message: Type.String({ examples: ['too many failed authentications from this address: retry in 1 s'] }),
    }),
  },
  { description: 'Too many failed authentications from this client address; retry after `Retry-After` seconds' },
);

/** The UI page is listed (its assets are not); `/ws` is listed although the WebSocket plugin hides it. */
const DOCS_PAGE = { tags: ['docs'], summary: 'OpenAPI UI (HTML)', security: PUBLIC, response: { 200: Type.String({ description: 'The Swagger UI page' }), 400: DUPLICATE_HEADER_REPLY } };

/**
 * How a route appears in the document. A wildcard (`/api/*`) becomes a named path parameter, `{path}`, since
 * OpenAPI has no wildcards; a route without declared security gets what its preHandlers enforce.
 */
function documented(schema: DeclaredSchema | undefined, url: string, route: RouteOptions, securityOf: (url: string) => FastifySchema['security']) {
  if (url === '/docs/') return { schema: DOCS_PAGE as FastifySchema, url: '/docs' };
  const declared: DeclaredSchema = { ...(schema ?? {}) };
  if (route.websocket) {
    declared.hide = false;
    declared.response = { 101: { description: 'Switching Protocols: the WebSocket is open' } };
  }
  if (declared.hide) return { schema: declared, url };
  const responses = declared.response as Record<string, unknown> | undefined;
  if (responses && !responses[400]) declared.response = { ...responses, 400: DUPLICATE_HEADER_REPLY };
  if (!declared.security) declared.security = securityOf(url);
  const takesKey = (declared.security ?? []).some((requirement) => Object.hasOwn(requirement, 'bearer'));
  const declaredNow = declared.response as Record<string, unknown> | undefined;
  if (takesKey && declaredNow && !declaredNow[429]) declared.response = { ...declaredNow, 429: TOO_MANY_FAILURES_REPLY };
  if (!url.endsWith('*')) return { schema: declared, url };
  const { '*': wildcard, ...others } = declared.params?.properties ?? {};
  const params = { ...declared.params, properties: { ...others, path: wildcard }, required: ['path'] };
  return { schema: { ...declared, params }, url: `${url.slice(0, -1)}{path}` };
}

/**
 * SPEC 9.4: the OpenAPI document generated from the routes' typebox schemas (`GET /openapi.json`) and its UI
 * (`GET /docs`). Routes written before security was declared get it here from what their preHandlers enforce:
 * `/metrics` needs a key unless it is public, the probes need none.
 */
const openapi: FastifyPluginAsync = async (app) => {
  const metricsPublic = app.fleetplane.config.metrics.public;
  const securityOf = (url: string) => (url === '/metrics' && !metricsPublic ? BEARER : PUBLIC);

  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'Fleetplane',
        version: packageVersion(),
        description:
          'Clustered, multi-tenant control-plane server. Envelope routes take POSTed JSON (application/json, at most 1 MiB) ' +
          'with a key as `Authorization: Bearer <key>` or as the envelope field `apikey`; every envelope reply has `Cache-Control: no-store` ' +
          'and errors are `{ "error": { "code", "message" } }`. A request with more than one `Host` or `Authorization` header is refused ' +
          'with 400 `duplicate_header`.',
      },
      tags: TAGS,
      components: {
        securitySchemes: {
          bearer: { type: 'http', scheme: 'bearer', bearerFormat: 'fpk_<key id>.<secret>', description: 'A Fleetplane key (`fleetplane keys create`)' },
        },
      },
    },
    transform: ({ schema, url, route }) => documented(schema as DeclaredSchema | undefined, url, route as RouteOptions, securityOf),
  });
  await app.register(swaggerUi, { routePrefix: '/docs', uiConfig: { deepLinking: false } });

  app.get(
    '/openapi.json',
    {
      schema: {
        tags: ['docs'],
        summary: 'This OpenAPI document',
        security: PUBLIC,
        response: { 200: Type.Object({}, { additionalProperties: true, description: 'OpenAPI 3.1 document' }) },
      },
    },
    async () => app.swagger(),
  );
};

export default fp(openapi, { name: 'fleetplane-openapi', dependencies: ['fleetplane-services'] });
