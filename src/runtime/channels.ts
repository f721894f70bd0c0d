import { RateLimitedWarnings } from '../logging/rate-limited.js';
import type { PrimaryMethod, WorkerApi, WorkerMethod } from './protocol.js';
import type { RpcCaller } from './rpc.js';

/** One worker process as the primary's subsystems see it. */
export interface WorkerEndpoint {
  readonly workerId: number;
  readonly pid: number;
  /** False once the process is gone or its channel closed. */
  readonly connected: boolean;
  /**
   * The primary's own worker runtime (single-process mode): it serves with the primary's own storage and
   * organization map, so their notifications are not for it.
   */
  readonly inProcess?: boolean;
  /** Requests and notifications to this worker (`worker.*` in `src/runtime/protocol.ts`); requests fail if it exits first. */
  readonly rpc: RpcCaller<WorkerApi>;
}

/** Registers what the primary answers its workers for `method`; `from` is the asking worker. */
export type AnswerWorkers = (method: PrimaryMethod, handler: (params: unknown, from: WorkerEndpoint) => unknown) => void;

/**
 * The primary's view of its workers' channels: which workers listen, and notifications to one or all of them.
 * Requests and notifications both ways are the one protocol of `src/runtime/protocol.ts`, carried by each
 * worker's `RpcChannel`; what arrives on one worker's channel arrives in the order it was sent.
 *
 * A started worker is not an endpoint until it reports that it listens (`{ fp: 'listening' }`), every
 * subsystem's handler registered: a forked process drops what arrives before that. Nothing is queued for it:
 * `notify` refuses (false) and `broadcast` skips it, and subsystems that hold state push it from `onConnect`,
 * which fires once the worker can hear it.
 */
export class PrimaryChannels {
  private readonly refusals: RateLimitedWarnings | undefined;
  private readonly connectListeners: Array<(endpoint: WorkerEndpoint) => void> = [];
  private readonly disconnectListeners: Array<(endpoint: WorkerEndpoint) => void> = [];
  /** Started, not listening yet. */
  private readonly starting = new Set<WorkerEndpoint>();
  private readonly live = new Set<WorkerEndpoint>();

  /** `log`: where refused messages are told (see `refuse`). */
  constructor(private readonly log?: { warn(fields: object, message: string): void }) {
    this.refusals = log ? new RateLimitedWarnings({ max: 5, windowMs: 60_000, what: 'malformed messages from workers', log }) : undefined;
  }

  /**
   * A message from a worker that its receiver refused (malformed, unknown): one warning line, at most five a
   * minute whatever a worker's code posts, then a count. The receiver drops the message and carries on.
   */
  refuse(from: Pick<WorkerEndpoint, 'workerId' | 'pid'>, where: string, reason: string): void {
    if (this.log) this.refusals!.warn(this.log, { targetWorker: from.workerId, pid: from.pid, where, reason }, 'refused a malformed message from a worker');
  }

  /** `listener` hears each worker once it listens: the first moment anything sent to it arrives. */
  onConnect(listener: (endpoint: WorkerEndpoint) => void): void {
    this.connectListeners.push(listener);
  }

  onDisconnect(listener: (endpoint: WorkerEndpoint) => void): void {
    this.disconnectListeners.push(listener);
  }

  endpoints(): WorkerEndpoint[] {
    return [...this.live].filter((endpoint) => endpoint.connected);
  }

  /** A notification to one listening worker; false when it does not listen (yet, or any more). */
  notify<M extends WorkerMethod>(endpoint: WorkerEndpoint, method: M, params: WorkerApi[M]['params']): boolean {
    if (!this.live.has(endpoint) || !endpoint.connected) return false;
    endpoint.rpc.notify(method, params);
    return true;
  }

  /** A notification to every listening worker process; the primary's own worker runtime is not one (see `inProcess`). */
  broadcast<M extends WorkerMethod>(method: M, params: WorkerApi[M]['params']): void {
    for (const endpoint of this.endpoints()) if (!endpoint.inProcess) this.notify(endpoint, method, params);
  }

  /** @internal the runtime reports each started worker process here; it listens once it says so (`listening`). */
  connected(endpoint: WorkerEndpoint): void {
    if (!this.live.has(endpoint)) this.starting.add(endpoint);
  }

  /** @internal */
  disconnected(endpoint: WorkerEndpoint): void {
    const known = this.starting.delete(endpoint) || this.live.delete(endpoint);
    if (!known) return;
    for (const listener of this.disconnectListeners) listener(endpoint);
  }

  /** @internal the worker's `{ fp: 'listening' }`: its handlers are registered, what is sent to it is heard. */
  listening(endpoint: WorkerEndpoint): void {
    if (!this.starting.delete(endpoint)) return;
    this.live.add(endpoint);
    for (const listener of this.connectListeners) listener(endpoint);
  }
}
