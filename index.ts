import type { FastifyPluginAsync } from 'fastify';
import type { BuildAppOptions, BuiltApp } from './app.js';
import { primaryRoutesOnDemand } from './primary-routes.js';
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
          const { asServedApp, buildApp: build } = await appModule();
          return asServedApp(await build({ server, logger: server.log.child({ component: 'http' }), extend: options.routes }));
        }),
      primaryRoutes:
        options.primaryRoutes ??
        (async (server) => primaryRoutesOnDemand(async () => (await appModule()).buildPrimaryRoutes(server, server.log.child({ component: 'http' })), server.log)),
    });
  },
};

export default Fleetplane;
