import { RateLimitedWarnings } from '../logging/rate-limited.js';
import type { ChannelMessage } from './messages.js';
import type { RpcCaller } from './rpc.js';

/** One worker process as the primary's subsystems see it. */
export interface WorkerEndpoint {
  readonly workerId: number;
  readonly pid: number;
  /** False once the process is gone or its channel closed. */
  readonly connected: boolean;
  post(message: ChannelMessage): void;
  /** Requests of this worker (`worker.*` in `src/runtime/protocol.ts`); they fail if it exits first. */
  readonly rpc: RpcCaller;
}

type ChannelHandler = (from: WorkerEndpoint, payload: unknown) => void;

/**
 * The channel a worker posts on once its message listener is installed, with every subsystem's handler
 * registered: from then on what the primary sends it is heard. Reserved by the channel layer.
 */
export const CHANNELS_READY = 'channels.ready';

/**
 * Named message streams between the primary and its workers, so subsystems (storage, IPC envelopes) share
 * one ordered channel per worker without knowing how processes are forked. Messages on one channel to one
 * worker arrive in the order they were sent.
 *
 * A started worker is not an endpoint until it reports its listener installed (`CHANNELS_READY`): a forked
 * process drops what arrives before that. Nothing is queued for it: `send` refuses (false) and `broadcast`
 * skips it, and subsystems that hold state push it from `onConnect`, which fires once the worker can hear it.
 */
export class PrimaryChannels {
  private readonly handlers = new Map<string, ChannelHandler>();
  private readonly refusals: RateLimitedWarnings | undefined;
  private readonly connectListeners: Array<(endpoint: WorkerEndpoint) => void> = [];
  private readonly disconnectListeners: Array<(endpoint: WorkerEndpoint) => void> = [];
  /** Started, listener not installed yet. */
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

  on(channel: string, handler: ChannelHandler): void {
    if (channel === CHANNELS_READY) throw new TypeError(`channel "${CHANNELS_READY}" is reserved`);
    this.handlers.set(channel, handler);
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

  send(endpoint: WorkerEndpoint, channel: string, payload: unknown): boolean {
    if (!this.live.has(endpoint) || !endpoint.connected) return false;
    try {
      endpoint.post({ fp: 'ch', channel, payload });
      return true;
    } catch {
      return false;
    }
  }

  broadcast(channel: string, payload: unknown): void {
    for (const endpoint of this.endpoints()) this.send(endpoint, channel, payload);
  }

  /**
   * @internal the runtime reports each started worker process here, and its messages to `receive`; the
   * worker counts as connected once it posts `CHANNELS_READY`.
   */
  connected(endpoint: WorkerEndpoint): void {
    if (!this.live.has(endpoint)) this.starting.add(endpoint);
  }

  /** @internal */
  disconnected(endpoint: WorkerEndpoint): void {
    const known = this.starting.delete(endpoint) || this.live.delete(endpoint);
    if (!known) return;
    for (const listener of this.disconnectListeners) listener(endpoint);
  }

  /** @internal */
  receive(from: WorkerEndpoint, message: ChannelMessage): void {
    if (message.channel === CHANNELS_READY) return this.listening(from);
    const handler = this.handlers.get(message.channel);
    if (handler) handler(from, message.payload);
    else this.refuse(from, `channel ${message.channel.slice(0, 64)}`, 'no such channel');
  }

  private listening(endpoint: WorkerEndpoint): void {
    if (!this.starting.delete(endpoint)) return;
    this.live.add(endpoint);
    for (const listener of this.connectListeners) listener(endpoint);
  }
}
