import cluster from 'node:cluster';
import type { LoadedConfig } from './config/load.js';
import type { FleetplaneConfig } from './config/schema.js';
import type { Server } from './server.js';
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
export async function init(config: FleetplaneConfig | LoadedConfig | undefined, options: InitOptions): Promise<Server> {
  const env = options.env ?? process.env;
  const forked = cluster.isWorker && env[INTERNAL_ENV.worker] !== undefined;
  // Each process loads its own boot only: a worker holds none of the supervision (fleet, lifecycle, autoscaler).
  if (forked) return (await import('./boot/worker.js')).bootWorker(env, options);
  return (await import('./boot/primary.js')).bootPrimary(config, options, env);
}
