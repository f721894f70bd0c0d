import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Logger } from '../logging/logger.js';
import type { ResolvedConfig } from '../config/schema.js';
import type { Clock } from './clock.js';
import type { ServerEmitter } from './events.js';
import type { ServedApp } from './served-app.js';
import type { WorkerRuntime } from './worker.js';
import type { PrimaryChannels } from './channels.js';
import type { WorkerBoot } from './messages.js';

/**
 * Node flags every worker starts with, before the operator's `workers.execArgv` (a later flag wins). V8 grows
 * the young generation to 2 × 16 MiB after the allocations of boot and an idle process never gives it back;
 * 8 MiB semispaces halve that reserve at no measurable cost in CPU per request. `--expose-gc` gives the worker
 * the one collection it asks for when quiet after it is ready, which hands the rest back (settle-memory.ts); the
 * worker takes the function out of the global scope as it binds to the primary, before its app is built.
 */
export const WORKER_NODE_FLAGS: readonly string[] = ['--max-semi-space-size=8', '--expose-gc'];

export interface PrimaryOptions {
  config: ResolvedConfig;
  /** The manager's connection, resolved once here and handed to each worker at fork (SPEC 13.1). */
  manager: WorkerBoot['manager'];
  serverId: string;
  workerCount: number;
  log: Logger;
  events: ServerEmitter;
  clock?: Clock;
  exec?: string;
  /** Single-process mode: the primary serves the app itself with this worker runtime. */
  local?: WorkerRuntime;
  channels: PrimaryChannels;
}

/** What the primary serves, given when it starts: built over the server object, which is built over it. */
export interface PrimarySurface {
  /** Single-process mode: builds the app the primary serves itself. */
  app?: () => Promise<ServedApp>;
  /** Requests the primary serves itself in fallback (e.g. `POST /control`). */
  fallbackRoutes?: (request: IncomingMessage, response: ServerResponse) => boolean;
  /** A running mesh peer's public URL, where the fallback redirects. */
  peerUrl?: () => string | undefined;
}

export type ShutdownHook = (signal: string) => void | Promise<void>;
