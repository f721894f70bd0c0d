import type { IncomingMessage, ServerResponse } from 'node:http';
import type { FastifyPluginAsync } from 'fastify';
import type { BuildAppOptions, BuiltApp } from './app.js';
import { errorBody } from './src/errors.js';
import { servedByPrimary } from './src/runtime/fallback.js';
import { init as initServer, type InitOptions } from './src/boot.js';
import { Server, type FleetplanePlugin } from './src/server.js';
import type { FleetplaneConfig } from './src/config/schema.js';
import type { LoadedConfig } from './src/config/load.js';
import { getCapabilities, supportsReusePort, type PlatformCapabilities } from './src/runtime/capabilities.js';

export { Server };
export type { FleetplanePlugin, PlatformCapabilities };
export type { FleetplaneConfig, ResolvedConfig } from './src/config/schema.js';
export type { ServerEvents } from './src/runtime/events.js';
export { ConfigError } from './src/config/errors.js';
export { loadConfig } from './src/config/load.js';
export type { BuildAppOptions, BuiltApp } from './app.js';

/** The HTTP application (Fastify and every plugin): loaded when first built, so a primary that never serves holds none of it. */
const appModule = () => import('./app.js');

/** The Fastify application every worker serves (see `app.ts`). */
export async function buildApp(options: BuildAppOptions): Promise<BuiltApp> {
  return (await appModule()).buildApp(options);
}

type PrimaryRoutes = (request: IncomingMessage, response: ServerResponse) => boolean;

/**
 * The primary's own `POST /control` and `GET /metrics`, answered only while no worker serves. The application
 * behind them is built on the first such request (a primary whose workers serve never loads the HTTP layer);
 * the request waits for it, unread. A build that fails answers 503 and is tried again on the next request.
 */
function primaryRoutesOnDemand(server: Server): PrimaryRoutes {
  let routes: Promise<PrimaryRoutes> | undefined;
  return (request, response) => {
    if (!servedByPrimary(request)) return false;
    routes ??= appModule().then(({ buildPrimaryRoutes }) => buildPrimaryRoutes(server, server.log.child({ component: 'http' })));
    routes.then(
      (route) => route(request, response),
      (error: unknown) => {
        routes = undefined;
        server.log.error({ err: error }, 'the primary could not build its control routes');
        const text = JSON.stringify(errorBody('unavailable', 'the control routes of this primary are not available; retry later'));
        response.writeHead(503, { 'Content-Type': 'application/json; charset=utf-8', 'Content-Length': Buffer.byteLength(text), 'Cache-Control': 'no-store', Connection: 'close' });
        response.end(text);
      },
    );
    return true;
  };
}

export type FleetplaneInitOptions = Partial<InitOptions> & {
  /** Trusted routes of the embedding application, served by every worker. */
  routes?: FastifyPluginAsync;
};

/** `const server = await Fleetplane.init(config)`: boots the primary or, in a forked process, a worker. */
export const Fleetplane = {
  /** What this platform offers (platform, CPUs, cgroup limit, SO_REUSEPORT...), measured in this process. */
  getCapabilities(): Promise<PlatformCapabilities> {
    return getCapabilities();
  },
  /** Whether this Node binds several listeners to one port with `reusePort` (false on Node 20). */
  supportsReusePort(): Promise<boolean> {
    return supportsReusePort();
  },
  init(config?: FleetplaneConfig | LoadedConfig, options: FleetplaneInitOptions = {}): Promise<Server> {
    return initServer(config, {
      ...options,
      app:
        options.app ??
        (async (server) => {
          const { asAppHost, buildApp: build } = await appModule();
          return asAppHost(await build({ server, logger: server.log.child({ component: 'http' }), extend: options.routes }));
        }),
      primaryRoutes: options.primaryRoutes ?? (async (server) => primaryRoutesOnDemand(server)),
    });
  },
};

export default Fleetplane;
