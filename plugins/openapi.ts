import fp from 'fastify-plugin';
import swagger from '@fastify/swagger';
import swaggerUi, { type FastifySwaggerUiConfigOptions, type FastifySwaggerUiOptions } from '@fastify/swagger-ui';
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
    // The UI cannot open a WebSocket: it offers no "Try it out" for the operation and says how to connect instead.
    declared.description = `${declared.description ?? ''}\n\n${WEBSOCKET_HOW_TO}`;
    (declared as Record<string, unknown>)[WEBSOCKET_EXTENSION] = true;
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

const MARK = '<rect x="2" y="4" width="32" height="32" rx="7" fill="#4f9dde"/><path d="M12 11h13v4.5h-8.5v3.5h7.5v4.5h-7.5v7.5h-4.5z" fill="#fff"/>';
const LOGO = `<svg xmlns="http://www.w3.org/2000/svg" width="190" height="40" viewBox="0 0 190 40">${MARK}<text x="44" y="28" font-family="sans-serif" font-size="22" font-weight="600" fill="#fff">Fleetplane</text></svg>`;
const FAVICON = `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 36 40">${MARK}</svg>`;

type SwaggerUIPlugin = NonNullable<FastifySwaggerUiConfigOptions['plugins']>[number];

/** Marks an operation that is a WebSocket, not a request the UI can send. */
const WEBSOCKET_EXTENSION = 'x-websocket';
const WEBSOCKET_HOW_TO =
  'This is a WebSocket, so this page cannot try it. Connect with any WebSocket client, e.g. from the server\'s directory: ' +
  "`KEY=$(cat data/admin.key) node -e \"const s = new (require('ws'))('ws://localhost:8080/ws', { headers: { authorization: 'Bearer ' + process.env.KEY } }); " +
  "s.on('open', () => s.send(JSON.stringify({ requestId: 1, method: 'status', master: true }))); s.on('message', (m) => { console.log(String(m)); s.close(); })\"`";

/**
 * The UI (`GET /docs`) as Fleetplane's: its title and logo, one URL per operation (deep linking), and no
 * "Try it out" for a WebSocket operation. The functions are sent to the browser as their source (the UI
 * plugin serializes them), so they use nothing but the page's globals.
 */
const DOCS_UI: FastifySwaggerUiOptions = {
  routePrefix: '/docs',
  uiConfig: {
    deepLinking: true,
    displayRequestDuration: true,
    plugins: [
      // The UI's own plugin that loads the document, kept beside this one.
      (system: unknown) => (globalThis as unknown as { SwaggerUIBundle: { plugins: { DownloadUrl: SwaggerUIPlugin } } }).SwaggerUIBundle.plugins.DownloadUrl(system),
      () => ({
        statePlugins: {
          spec: {
            wrapSelectors: {
              allowTryItOutFor:
                (original: (...args: unknown[]) => boolean, system: { specSelectors: { specJson: () => { getIn: (path: string[]) => unknown } } }) =>
                (state: unknown, path: string, method: string) =>
                  system.specSelectors.specJson().getIn(['paths', path, method, 'x-websocket']) === true ? false : original(state, path, method),
            },
          },
        },
      }),
    ],
  },
  theme: {
    title: 'Fleetplane API',
    css: [{ filename: 'fleetplane.css', content: '.swagger-ui .topbar .download-url-wrapper { display: none; } .swagger-ui .topbar { background: #1d2a3a; }' }],
    favicon: [{ filename: 'favicon.svg', rel: 'icon', sizes: 'any', type: 'image/svg+xml', content: FAVICON }],
  },
  logo: { type: 'image/svg+xml', content: LOGO, href: '/docs' },
};

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
          'with 400 `duplicate_header`, one with a `Transfer-Encoding` other than `chunked` alone with 501 `unsupported_transfer_encoding`. A node that does not serve a request right now (its workers cordoned, draining or starting, or the ' +
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
  await app.register(swaggerUi, DOCS_UI);

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
