import type { FastifyPluginAsync } from 'fastify';
import { buildApp, asAppHost, buildPrimaryRoutes } from './app.js';
import { init as initServer, type InitOptions } from './src/boot.js';
import { Server } from './src/server.js';
import type { FleetplaneConfig } from './src/config/schema.js';
import type { LoadedConfig } from './src/config/load.js';

export { Server };
export type { FleetplaneConfig, ResolvedConfig } from './src/config/schema.js';
export type { ServerEvents } from './src/runtime/events.js';
export { ConfigError } from './src/config/errors.js';
export { loadConfig } from './src/config/load.js';
export { buildApp } from './app.js';

export type FleetplaneInitOptions = Partial<InitOptions> & {
  /** Trusted routes of the embedding application, served by every worker. */
  routes?: FastifyPluginAsync;
};

/** `const server = await Fleetplane.init(config)`: boots the primary or, in a forked process, a worker. */
export const Fleetplane = {
  init(config?: FleetplaneConfig | LoadedConfig, options: FleetplaneInitOptions = {}): Promise<Server> {
    return initServer(config, {
      ...options,
      app:
        options.app ??
        (async (server) => asAppHost(await buildApp({ server, logger: server.log.child({ component: 'http' }), extend: options.routes }))),
      primaryRoutes: options.primaryRoutes ?? ((server) => buildPrimaryRoutes(server, server.log.child({ component: 'http' }))),
    });
  },
};

export default Fleetplane;
