import cluster from 'node:cluster';
import type { LoadedConfig } from './config/load.js';
import type { FleetplaneConfig } from './config/schema.js';
import type { Server } from './server.js';
import { bootPrimary } from './boot/primary.js';
import { bootWorker } from './boot/worker.js';
import { INTERNAL_ENV, type InitOptions } from './boot/options.js';

/*
 * The composition root. Each process builds its services in order, hands each the narrow interfaces it needs,
 * and only then the server object over them: the primary in boot/primary.ts, a worker in boot/worker.ts.
 */

export type { AppFactory, InitOptions, PrimaryRoutes } from './boot/options.js';
export { INTERNAL_ENV } from './boot/options.js';

/**
 * Boots this process's part of the server. In the primary: resolve config, bind ports, fork workers (or serve
 * in-process with `workers: 0`). In a worker: take the resolved config from the primary and serve the app.
 */
export function init(config: FleetplaneConfig | LoadedConfig | undefined, options: InitOptions): Promise<Server> {
  const env = options.env ?? process.env;
  const forked = cluster.isWorker && env[INTERNAL_ENV.worker] !== undefined;
  return forked ? bootWorker(env, options) : bootPrimary(config, options, env);
}
