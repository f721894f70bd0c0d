import { createServer as createHttpServer, type Server as HttpServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer, type Server as HttpsServer } from 'node:https';
import { readFileSync } from 'node:fs';
import Fastify, { LogController, type FastifyInstance, type FastifyPluginAsync } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { Logger } from './src/logging/logger.js';
import { lazyChildLogger } from './src/logging/lazy-child.js';
import { armConnectionChecks, type ServedApp } from './src/runtime/served-app.js';
import { answerClientError } from './src/http/raw-errors.js';
import errors, { frameworkErrors } from './plugins/errors.js';
import requestGuard from './plugins/request-guard.js';
import services, { type RouteContext } from './plugins/services.js';
import httpMetrics from './plugins/http-metrics.js';
import authorize from './plugins/authorize.js';
import envelope from './plugins/envelope.js';
import httpHabits from './plugins/http-habits.js';
import { requestIdFor } from './src/http/request-id.js';
import { servedByPrimary } from './src/runtime/fallback.js';
import control from './routes/control.js';
import metrics from './routes/metrics.js';

export interface BuildAppOptions {
  server: RouteContext;
  logger?: Logger | false;
  /** Trusted routes of an embedding application, registered last. */
  extend?: FastifyPluginAsync;
  /** `control`: only what the primary serves itself in fallback (`POST /control`, `GET /metrics`, the dashboard). */
  surface?: 'full' | 'control';
}

export interface BuiltApp {
  app: FastifyInstance;
  http: HttpServer;
  https?: HttpsServer;
}

/**
 * The Fastify application every worker serves. Its servers never listen: the primary accepts connections and
 * hands them over, so the same app serves HTTP and (when configured) HTTPS through one router.
 */
export async function buildApp(options: BuildAppOptions): Promise<BuiltApp> {
  const { config } = options.server;
  let https: HttpsServer | undefined;
  let http!: HttpServer;
  const app = Fastify({
    loggerInstance: options.logger || undefined,
    logger: options.logger === false ? false : undefined,
    childLoggerFactory: lazyChildLogger as never,
    logController: new LogController({ disableRequestLogging: !config.log.requests }),
    bodyLimit: 1024 * 1024,
    // The caller's X-Request-Id when valid, else a UUID; it is the `reqId` of every log line of the request
    // (the log controller's default label).
    genReqId: requestIdFor,
    requestIdHeader: false,
    // `request.ip` (and the access log) name the client behind a trusted proxy. Tenants are never chosen by
    // X-Forwarded-Host, which this also makes `request.host` read: see `tenantHost`.
    trustProxy: config.http.trustProxy.length > 0 ? config.http.trustProxy : false,
    // Unknown fields are errors that name the field, and types are never coerced: what a caller sends is
    // what is validated.
    ajv: { customOptions: { removeAdditional: false, coerceTypes: false, allErrors: false } },
    onProtoPoisoning: 'error',
    onConstructorPoisoning: 'error',
    return503OnClosing: false,
    // Requests Node's parser refuses (malformed, headers or request line too large, too slow) and those the
    // router refuses get the same error shape as every other answer.
    clientErrorHandler: answerClientError,
    frameworkErrors,
    serverFactory: (handler) => {
      const listener = handler as (request: IncomingMessage, response: ServerResponse) => void;
      http = createHttpServer(listener);
      if (config.https.key && config.https.cert) {
        const identity = options.server.https;
        // The process's identity when it has one (it swaps the certificate on a reload), else the files.
        https = createHttpsServer(identity ? identity.pair : { key: readFileSync(config.https.key), cert: readFileSync(config.https.cert) }, listener);
        identity?.serve(https);
        // One router for both: WebSocket upgrades over TLS reach the same handlers.
        https.on('upgrade', (request, socket, head) => http.emit('upgrade', request, socket, head));
        https.on('clientError', answerClientError);
      }
      return http;
    },
  }).withTypeProvider<TypeBoxTypeProvider>();

  await app.register(errors);
  await app.register(requestGuard);
  await app.register(httpHabits, { http: config.http, server: options.server });
  await app.register(services, { server: options.server });
  await app.register(httpMetrics);
  await app.register(authorize);
  await app.register(envelope);
  if (options.surface === 'control') {
    await app.register(control);
    await app.register(metrics);
    await app.register((await import('./routes/dashboard.js')).default);
  } else {
    const { openapi, shed, staticFiles, routes } = await fullSurface();
    await app.register(openapi);
    await app.register(shed);
    // SPEC 9.3: the embedding application's routes come first, and a built-in route with the same method and
    // path steps aside instead of failing the boot.
    if (options.extend) await app.register(options.extend);
    for (const plugin of routes) await app.register(yieldingTo(plugin));
    await app.register(staticFiles, { static: config.http.static });
  }
  await app.ready();
  return { app: app as unknown as FastifyInstance, http, https };
}

/**
 * What only the full surface serves (docs, static files, probes, the WebSocket and envelope routes), loaded when
 * that surface is built: a primary builds the control surface alone and never holds their code.
 */
async function fullSurface() {
  const [openapi, shed, staticFiles, health, ws, api, workflows, webhooks, crud, manager, dashboard] = await Promise.all([
    import('./plugins/openapi.js'),
    import('./plugins/shed.js'),
    import('./plugins/static.js'),
    import('./routes/health.js'),
    import('./routes/ws.js'),
    import('./routes/api.js'),
    import('./routes/workflows.js'),
    import('./routes/webhooks.js'),
    import('./routes/crud.js'),
    import('./routes/manager.js'),
    import('./routes/dashboard.js'),
  ]);
  const routes = [health.default, metrics, control, ws.default, api.default, workflows.default, webhooks.default, crud.default, manager.default, dashboard.default] as FastifyPluginAsync[];
  return { openapi: openapi.default, shed: shed.default, staticFiles: staticFiles.default, routes };
}

const SHORTHANDS = ['get', 'head', 'post', 'put', 'delete', 'patch', 'options'] as const;

/**
 * A built-in route plugin that skips each of its routes whose method and path an earlier plugin (the embedding
 * application's) already registered. The plugin gets its own encapsulated instance, so only its calls are
 * affected.
 */
function yieldingTo(plugin: FastifyPluginAsync): FastifyPluginAsync {
  return async (instance, options) => {
    const taken = (methods: string | string[], url: string) =>
      [methods].flat().every((method) => {
        const exists = instance.hasRoute({ method: method.toUpperCase() as never, url });
        if (exists) instance.log.info({ method: method.toUpperCase(), url }, 'a custom route takes precedence over the built-in one');
        return exists;
      });
    for (const name of SHORTHANDS) {
      const original = instance[name] as (...args: unknown[]) => FastifyInstance;
      (instance as unknown as Record<string, unknown>)[name] = function (this: FastifyInstance, url: string, ...rest: unknown[]) {
        return taken(name, url) ? this : original.call(this, url, ...rest);
      };
    }
    const route = instance.route;
    (instance as unknown as Record<string, unknown>).route = function (this: FastifyInstance, definition: { method: string | string[]; url: string }) {
      return taken(definition.method, definition.url) ? this : route.call(this, definition as never);
    };
    await plugin(instance, options);
  };
}

/**
 * The primary's fallback surface: `POST /control` and `GET /metrics` (SPEC 1.3: never redirected) through the
 * same authorization as the workers'.
 */
export async function buildPrimaryRoutes(server: RouteContext, logger?: Logger): Promise<(request: IncomingMessage, response: ServerResponse) => boolean> {
  const { app } = await buildApp({ server, logger, surface: 'control' });
  return (request, response) => {
    if (!servedByPrimary(request)) return false;
    app.routing(request, response);
    return true;
  };
}

/** The worker's view of the built app: servers to hand connections to, and how to close it. */
export function asServedApp(built: BuiltApp): ServedApp {
  for (const server of [built.http, built.https]) if (server) armConnectionChecks(server);
  return { http: built.http, https: built.https, close: () => built.app.close() };
}
