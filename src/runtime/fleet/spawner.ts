import type { Logger } from '../../logging/logger.js';
import type { ResolvedConfig } from '../../config/schema.js';
import type { Clock } from '../clock.js';
import { isInternalMessage, type WorkerBoot, type WorkerToPrimary } from '../messages.js';
import { primaryMethodChecks, refuseFromWorker, workerResultChecks } from '../protocol.js';
import { RpcChannel, type PrimaryEnd } from '../rpc.js';
import type { PrimaryChannels } from '../channels.js';
import type { ForkPort } from './ports.js';
import type { FleetEvents, WorkerRecord } from './worker-record.js';

export interface SpawnerDeps {
  config: ResolvedConfig;
  /** Resolved by the primary at boot, handed to each worker with the config. */
  manager: WorkerBoot['manager'];
  serverId: string;
  fork: ForkPort;
  clock: Clock;
  log: Logger;
  events: FleetEvents;
  channels: Pick<PrimaryChannels, 'connected' | 'refuse'>;
  /** Workers in the fleet, as each worker is told at boot. */
  target(): number;
  /** The primary's handlers for calls workers make (metrics aggregation...). */
  configureRpc(rpc: PrimaryEnd, record: WorkerRecord): void;
  /** An internal message from the worker (`ready` arrives after the record's `ready` promise settled true). */
  receive(record: WorkerRecord, message: WorkerToPrimary): void;
  /** The worker's IPC channel closed: it is dying or dead, and takes nothing sent to it any more. */
  disconnected(record: WorkerRecord): void;
  /** The worker process is gone; its `ready` settled false if it never was, `exited` settles right after. */
  exited(record: WorkerRecord, code: number | null, signal: string | null): void;
}

/** Forks worker processes: their environment, their record, and a worker that never gets ready killed. */
export class WorkerSpawner {
  private envOverlay: Record<string, string> = {};

  constructor(private readonly deps: SpawnerDeps) {}

  /** Merges variables (already guarded) into the environment of every worker forked from now on. */
  patchEnv(env: Record<string, string>): void {
    this.envOverlay = { ...this.envOverlay, ...env };
  }

  /** Throws when the fork itself fails. */
  spawn(slot: number): WorkerRecord {
    const { config, clock, log } = this.deps;
    const worker = this.deps.fork.forkWorker({
      ...config.workers.env,
      ...this.envOverlay,
      FLEETPLANE_INTERNAL_WORKER: String(slot),
      FLEETPLANE_INTERNAL_TOTAL_WORKERS: String(this.deps.target()),
      FLEETPLANE_INTERNAL_SERVER_ID: this.deps.serverId,
    });
    const now = clock.now();
    let markReady: (ready: boolean) => void = () => {};
    let markExited: () => void = () => {};
    // A notification a worker's code got wrong has no caller to answer: it is refused as malformed messages are.
    const rpc: PrimaryEnd = new RpcChannel((message) => worker.send(message), {
      methods: primaryMethodChecks,
      results: workerResultChecks,
      refused: (reason) => this.deps.channels.refuse(record.endpoint, 'rpc', reason),
    });
    const record: WorkerRecord = {
      slot,
      pid: worker.pid,
      worker,
      status: 'starting',
      forkedAt: now,
      lastBeatAt: now,
      beats: { laggyBeats: 0 },
      acked: false,
      handOffs: new Map(),
      ready: new Promise((resolve) => (markReady = resolve)),
      exited: new Promise((resolve) => (markExited = resolve)),
      rpc,
      endpoint: {
        workerId: slot,
        pid: worker.pid,
        get connected() {
          return worker.isConnected();
        },
        rpc,
      },
    };
    this.deps.channels.connected(record.endpoint);
    this.deps.configureRpc(record.rpc, record);
    const cancelReadyTimeout = clock.setTimeout(() => {
      if (record.readyAt === undefined && !record.retiring) {
        log.error({ worker: slot, pid: record.pid }, 'worker not ready in time: killing it');
        worker.kill('SIGKILL');
      }
    }, config.workers.readyTimeoutMs);
    worker.onOnline(() => this.deps.events.emitSafe('worker:online', { workerId: slot, pid: record.pid }));
    worker.onMessage((message) => {
      if (!isInternalMessage(message)) return;
      const refused = refuseFromWorker(message);
      // A worker's code can post anything on its channel: refused here, never handled.
      if (refused) return this.deps.channels.refuse(record.endpoint, 'message', refused);
      // The config travels over IPC: a worker's environment is readable by the user's other processes.
      if (message.fp === 'boot') return worker.send({ fp: 'boot', config, manager: this.deps.manager });
      if (message.fp === 'ready') {
        cancelReadyTimeout();
        markReady(true);
      }
      this.deps.receive(record, message as WorkerToPrimary);
    });
    worker.onError((error) => channelError(log, slot, error));
    worker.onDisconnect(() => this.deps.disconnected(record));
    worker.onExit((code, signal) => {
      cancelReadyTimeout();
      markReady(false);
      this.deps.exited(record, code, signal);
      markExited();
    });
    return record;
  }
}

/** Errors of a channel whose worker has gone: the exit (or the shutdown) says what happened, once. */
const CLOSED_CHANNEL = new Set(['EPIPE', 'ERR_IPC_CHANNEL_CLOSED', 'ECONNRESET']);

/**
 * A message to a worker that exits meanwhile (every worker on Ctrl-C, which signals the whole process group)
 * fails with EPIPE or a closed channel: expected, so a debug line without a stack; anything else is a warning.
 */
export function channelError(log: Pick<Logger, 'warn' | 'debug'>, slot: number, error: NodeJS.ErrnoException): void {
  if (error.code && CLOSED_CHANNEL.has(error.code)) log.debug({ worker: slot, code: error.code }, 'worker channel closed');
  else log.warn({ err: error, worker: slot }, 'worker channel error');
}
