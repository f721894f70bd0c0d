import type { Logger } from '../../logging/logger.js';
import type { Beat } from '../heartbeat.js';
import type { BeatHistory } from './health-policy.js';
import type { PrimaryToWorker } from '../messages.js';
import type { PrimaryEnd } from '../rpc.js';
import type { RecycleReason, ServerEventArgs, ServerEventName } from '../events.js';
import type { WorkerStatus } from '../status.js';
import type { WorkerEndpoint } from '../channels.js';
import type { ConnectionHandle } from '../listeners.js';
import type { WorkerHandle } from './ports.js';

/** What the primary knows of one worker process, shared by the fleet's coordinators. */
export interface WorkerRecord {
  slot: number;
  pid: number;
  worker: WorkerHandle;
  status: WorkerStatus;
  forkedAt: number;
  readyAt?: number;
  lastBeatAt: number;
  health?: Beat;
  beats: BeatHistory;
  /** Why this worker is being taken out (recycle, rolling restart, shutdown); its exit is then graceful. */
  retiring?: RecycleReason | 'shutdown';
  /** A replacement is booting; this worker keeps serving until it is ready. */
  replacing?: RecycleReason;
  /** Connections sent to this worker that it has not confirmed taking, by hand-off id, with how to re-route each. */
  handOffs: Map<number, { connection: ConnectionHandle; reroute: () => void }>;
  acked: boolean;
  /** The worker began its shutdown on a signal it received itself (a group signal reaches every process). */
  stoppedOnSignal?: string;
  exited: Promise<void>;
  ready: Promise<boolean>;
  rpc: PrimaryEnd;
  endpoint: WorkerEndpoint;
  cancelAge?: () => void;
}

/** Where the fleet announces server events (the server's event source). */
export interface FleetEvents {
  emitSafe<E extends ServerEventName>(event: E, ...args: ServerEventArgs[E]): boolean;
}

/** Changes a worker's status as the primary mirrors it, announcing the change. */
export function setStatus(record: WorkerRecord, status: WorkerStatus, events: FleetEvents): void {
  if (record.status === status) return;
  const oldStatus = record.status;
  record.status = status;
  events.emitSafe('status_change', { worker: record.slot, oldStatus, newStatus: status });
}

/** A control message to a worker; one whose channel is already gone misses nothing it could still act on. */
export function sendTo(record: WorkerRecord, message: PrimaryToWorker, log: Logger): void {
  if (!record.worker.isConnected()) return;
  try {
    record.worker.send(message);
  } catch (error) {
    log.debug({ err: error, worker: record.slot }, 'message to worker not sent');
  }
}
