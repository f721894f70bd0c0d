import type { IncomingMessage, ServerResponse } from 'node:http';
import type { DestinationStream } from 'pino';
import type { ConfigFlags } from '../config/load.js';
import type { ServedApp } from '../runtime/served-app.js';
import type { FleetplanePlugin, Server } from '../server.js';

export type AppFactory = (server: Server) => Promise<ServedApp>;

/** Requests the primary answers itself when no worker takes traffic; returns false for the rest. */
export type PrimaryRoutes = (request: IncomingMessage, response: ServerResponse) => boolean;

export interface InitOptions {
  /** Builds what each worker serves. */
  app: AppFactory;
  /** Builds the few routes the primary serves itself in fallback (`POST /control`). */
  primaryRoutes?: (server: Server) => Promise<PrimaryRoutes>;
  /** Script workers run (default: this process's entry script, which calls `init` again in the worker). */
  exec?: string;
  /** Install SIGTERM / SIGINT / SIGBREAK (graceful shutdown, then exit 0) and SIGHUP (rolling restart). */
  handleSignals?: boolean;
  flags?: ConfigFlags;
  env?: NodeJS.ProcessEnv;
  cwd?: string;
  logDestination?: DestinationStream;
  /** Installed in order in the primary before the workers are forked (ignored in workers). */
  plugins?: FleetplanePlugin[];
}

/** Environment the primary gives each worker; not part of the public configuration. */
export const INTERNAL_ENV = {
  worker: 'FLEETPLANE_INTERNAL_WORKER',
  total: 'FLEETPLANE_INTERNAL_TOTAL_WORKERS',
  serverId: 'FLEETPLANE_INTERNAL_SERVER_ID',
} as const;
