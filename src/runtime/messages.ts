import type { WorkerStatus } from './status.js';
import type { ResolvedConfig } from '../config/schema.js';

/**
 * Internal primary ↔ worker messages. Every one carries `fp` so they never mix with messages an embedding
 * application sends on the same channel.
 */
export type WorkerToPrimary =
  /** A forked worker's first message: it asks for the resolved config (secrets included), never put in its environment. */
  | { fp: 'boot' }
  /** Every subsystem's handler is registered: what the primary sends from now on is heard (see `PrimaryChannels`). */
  | { fp: 'listening' }
  | { fp: 'ready' }
  /** The connection of hand-off `id` arrived: the primary may close its own copy. */
  | { fp: 'taken'; id: number }
  | { fp: 'status'; status: WorkerStatus }
  | { fp: 'health'; rss: number; heapUsed: number; lagMs: number }
  /** The worker is shutting down; `signal` when a signal it received itself started that (not the primary). */
  | { fp: 'ack'; signal?: string }
  | RpcCall
  | RpcReply;

export type PrimaryToWorker =
  | ({ fp: 'boot' } & WorkerBoot)
  | { fp: 'conn'; secure: boolean; id: number }
  /** `type`: `<shutdown.messagePrefix>:shutdown`, for application code in the worker listening on `process`. */
  | { fp: 'shutdown'; reason: string; type?: string }
  | { fp: 'fleet'; ready: boolean }
  | RpcCall
  | RpcReply;

/**
 * What a worker is given at fork, over IPC: the resolved config and what the primary resolved from its store
 * at boot (the manager's connection fields and key, SPEC 13.1), so no worker repeats that lookup.
 */
export interface WorkerBoot {
  config: ResolvedConfig;
  manager: { organization_id: string | null; host: string | null; apiKey?: string };
}

export interface RpcCall {
  fp: 'rpc';
  id: number;
  method: string;
  params?: unknown;
}

export interface RpcReply {
  fp: 'reply';
  id: number;
  ok: boolean;
  result?: unknown;
  error?: string;
  /** The error's code (e.g. an envelope error's), when it had one. */
  code?: string;
  field?: string;
}

export function isInternalMessage(message: unknown): message is { fp: string } {
  return typeof message === 'object' && message !== null && typeof (message as { fp?: unknown }).fp === 'string';
}
