import type { ChannelMessage } from './messages.js';

/** One worker process as the primary's subsystems see it. */
export interface WorkerEndpoint {
  readonly workerId: number;
  readonly pid: number;
  /** False once the process is gone or its channel closed. */
  readonly connected: boolean;
  post(message: ChannelMessage): void;
}

type ChannelHandler = (from: WorkerEndpoint, payload: unknown) => void;

/**
 * Named message streams between the primary and its workers, so subsystems (storage, IPC envelopes) share
 * one ordered channel per worker without knowing how processes are forked. Messages on one channel to one
 * worker arrive in the order they were sent.
 */
export class PrimaryChannels {
  private readonly handlers = new Map<string, ChannelHandler>();
  private readonly disconnectListeners: Array<(endpoint: WorkerEndpoint) => void> = [];
  private readonly live = new Set<WorkerEndpoint>();

  on(channel: string, handler: ChannelHandler): void {
    this.handlers.set(channel, handler);
  }

  onDisconnect(listener: (endpoint: WorkerEndpoint) => void): void {
    this.disconnectListeners.push(listener);
  }

  endpoints(): WorkerEndpoint[] {
    return [...this.live].filter((endpoint) => endpoint.connected);
  }

  send(endpoint: WorkerEndpoint, channel: string, payload: unknown): boolean {
    if (!endpoint.connected) return false;
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
   * @internal the runtime reports processes and their messages here. A forked worker drops what is sent
   * before its listener exists, so subsystems wait for the worker to ask (as storage and shedding do).
   */
  connected(endpoint: WorkerEndpoint): void {
    this.live.add(endpoint);
  }

  /** @internal */
  disconnected(endpoint: WorkerEndpoint): void {
    if (!this.live.delete(endpoint)) return;
    for (const listener of this.disconnectListeners) listener(endpoint);
  }

  /** @internal */
  receive(from: WorkerEndpoint, message: ChannelMessage): void {
    this.handlers.get(message.channel)?.(from, message.payload);
  }
}
