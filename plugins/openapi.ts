import fp from 'fastify-plugin';
import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import { Type } from '@sinclair/typebox';
import type { FastifyPluginAsync, FastifySchema, RouteOptions } from 'fastify';
import { packageFacts } from '../src/package.js';
import { documentedResponses, type Responses } from './openapi-responses.js';
import { DOCS_PAGE_REPLY, DUPLICATE_HEADER_REPLY, SWITCHING_PROTOCOLS_REPLY } from '../schemas/responses.js';

const PUBLIC: FastifySchema['security'] = [];
const BEARER = [{ bearer: [] }];

const TAGS = [
  { name: 'api', description: "Calls to the organization's API providers: named endpoints of upstream HTTP services" },
  { name: 'control', description: 'Control envelopes to this server, its workers and its mesh peers, and the WebSocket that carries envelopes and events' },
  { name: 'dashboard', description: 'The fleet dashboard: a page and its assets, shipped in the package' },
  { name: 'data', description: "Create, read, update and delete documents in the organization's collections" },
  { name: 'docs', description: 'This document and its interactive UI' },
  { name: 'probes', description: 'Liveness, readiness and Prometheus metrics for load balancers and monitoring' },
  { name: 'webhooks', description: 'Signed deliveries from outside services that start workflows' },
  { name: 'workflows', description: 'Runs of the organization’s workflows' },
];

type DeclaredSchema = FastifySchema & { hide?: boolean; params?: { properties?: Record<string, unknown> } };

/** The UI page is listed (its assets are not); `/ws` is listed although the WebSocket plugin hides it. */
const DOCS_PAGE = {
  tags: ['docs'],
  operationId: 'getDocsPage',
  summary: 'Interactive documentation (HTML)',
  description: 'The page that renders this document; its scripts and styles are served under `/docs/static/`.',
  security: PUBLIC,
  response: { 200: DOCS_PAGE_REPLY, 400: DUPLICATE_HEADER_REPLY },
};

/**
 * How a route appears in the document. A wildcard (`/api/*`) becomes a named path parameter, `{path}`, since
 * OpenAPI has no wildcards; a route without declared security gets what its preHandlers enforce; the answers
 * the app's hooks give on every route (see `documentedResponses`) are added to what the route declares.
 */
function documented(schema: DeclaredSchema | undefined, url: string, route: RouteOptions, securityOf: (url: string) => FastifySchema['security']) {
  const declared: DeclaredSchema = url === '/docs/' ? { ...(DOCS_PAGE as DeclaredSchema) } : { ...(schema ?? {}) };
  const documentedUrl = url === '/docs/' ? '/docs' : url;
  if (route.websocket) {
    declared.hide = false;
    declared.response = { 101: SWITCHING_PROTOCOLS_REPLY, ...(declared.response as Responses | undefined) };
  }
  if (declared.hide) return { schema: declared, url };
  if (!declared.security) declared.security = securityOf(documentedUrl);
  const takesKey = (declared.security ?? []).some((requirement) => Object.hasOwn(requirement, 'bearer'));
  const method = [route.method].flat()[0]!;
  declared.response = documentedResponses((declared.response ?? {}) as Responses, { method, url: documentedUrl, envelope: route.config?.envelope === true, takesKey });
  if (!documentedUrl.endsWith('*')) return { schema: declared, url: documentedUrl };
  const { '*': wildcard, ...others } = declared.params?.properties ?? {};
  const params = { ...declared.params, properties: { ...others, path: wildcard }, required: ['path'] };
  return { schema: { ...declared, params }, url: `${documentedUrl.slice(0, -1)}{path}` };
}

/** `server.publicUrl` when configured; else the document's own origin (a relative server). */
function serversOf(publicUrl: string | undefined) {
  if (!publicUrl) return [{ url: '/', description: 'The server that serves this document' }];
  return [{ url: publicUrl.replace(/\/+$/, ''), description: "This server's public URL" }];
}

/**
 * The OpenAPI document generated from the routes' typebox schemas (`GET /openapi.json`) and its UI
 * (`GET /docs`). Routes written before security was declared get it here from what their preHandlers enforce:
 * `/metrics` needs a key unless it is public, the probes need none.
 */
const openapi: FastifyPluginAsync = async (app) => {
  const { config } = app.fleetplane;
  const metricsPublic = config.metrics.public;
  const securityOf = (url: string) => (url === '/metrics' && !metricsPublic ? BEARER : PUBLIC);
  const { version, license } = packageFacts() ?? { version: '0.0.0' };

  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'Fleetplane',
        version,
        ...(license ? { license: { name: license, identifier: license } } : {}),
        description:
          'Clustered, multi-tenant control-plane server. Envelope routes take POSTed JSON (application/json, at most 1 MiB) ' +
          'with a key as `Authorization: Bearer <key>` or as the envelope field `apikey`; every envelope reply has `Cache-Control: no-store` ' +
          'and errors are `{ "error": { "code", "message" } }`. A request with more than one `Host` or `Authorization` header is refused ' +
          'with 400 `duplicate_header`. A node that does not serve a request right now (its workers cordoned, draining or starting, or the ' +
          'organization shed there) answers 307 to another entry point, or 503 with `Retry-After` when it knows none; probes, metrics ' +
          'and `POST /control` are always answered.',
      },
      servers: serversOf(config.server.publicUrl),
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
        operationId: 'getOpenApiDocument',
        summary: 'This OpenAPI document',
        description: 'The same document as `openapi/openapi.json` in the package, with this server as its `servers` entry when `server.publicUrl` is set.',
        security: PUBLIC,
        response: { 200: Type.Object({}, { additionalProperties: true, description: 'The OpenAPI 3.1 document' }) },
      },
    },
    async () => app.swagger(),
  );
};

export default fp(openapi, { name: 'fleetplane-openapi', dependencies: ['fleetplane-services'] });
