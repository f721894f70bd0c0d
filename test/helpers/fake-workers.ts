import type { ConnectionHandle } from '../../src/runtime/listeners.js';
import type { PrimaryToWorker, WorkerToPrimary } from '../../src/runtime/messages.js';
import type { WorkerStatus } from '../../src/runtime/status.js';
import { RpcChannel, type PrimaryEnd } from '../../src/runtime/rpc.js';
import type { ForkPort, WorkerHandle } from '../../src/runtime/fleet/ports.js';
import type { WorkerRecord } from '../../src/runtime/fleet/worker-record.js';

export interface SentConnection {
  message: PrimaryToWorker;
  connection: ConnectionHandle;
  written: (error: Error | null) => void;
}

/**
 * A worker process as the fleet sees it, without a process: what the primary sends is recorded, signals are
 * recorded (and end it when it `diesOn` them), and the test plays the worker's side with `say` and `exit`.
 */
export class FakeWorker implements WorkerHandle {
  connected = true;
  readonly sent: PrimaryToWorker[] = [];
  readonly connections: SentConnection[] = [];
  readonly signals: NodeJS.Signals[] = [];
  /** Signals that end this worker (a worker that handles SIGTERM well: ['SIGTERM', 'SIGINT', 'SIGKILL']). */
  diesOn: NodeJS.Signals[] = ['SIGKILL'];
  exitedWith: { code: number | null; signal: string | null } | undefined;
  private readonly listeners = { online: [] as Array<() => void>, message: [] as Array<(message: unknown) => void>, error: [] as Array<(error: Error) => void>, exit: [] as Array<(code: number | null, signal: string | null) => void>, disconnect: [] as Array<() => void> };

  constructor(
    readonly pid: number,
    readonly env: Record<string, string> = {},
  ) {}

  isConnected(): boolean {
    return this.connected;
  }

  send(message: PrimaryToWorker): void {
    if (!this.connected) throw new Error('channel closed');
    this.sent.push(message);
  }

  sendConnection(message: PrimaryToWorker, connection: ConnectionHandle, written: (error: Error | null) => void): void {
    this.connections.push({ message, connection, written });
  }

  kill(signal: NodeJS.Signals): void {
    this.signals.push(signal);
    if (this.diesOn.includes(signal)) this.exit(null, signal);
  }

  onOnline(listener: () => void): void {
    this.listeners.online.push(listener);
  }

  onMessage(listener: (message: unknown) => void): void {
    this.listeners.message.push(listener);
  }

  onError(listener: (error: Error) => void): void {
    this.listeners.error.push(listener);
  }

  onExit(listener: (code: number | null, signal: string | null) => void): void {
    this.listeners.exit.push(listener);
  }

  onDisconnect(listener: () => void): void {
    this.listeners.disconnect.push(listener);
  }

  /** The IPC channel closes (a killed worker's first sign), before its exit is seen. */
  disconnect(): void {
    if (!this.connected) return;
    this.connected = false;
    for (const listener of this.listeners.disconnect) listener();
  }

  /** The channel fails, as a send to a worker that is exiting does (EPIPE). */
  channelError(error: Error): void {
    for (const listener of this.listeners.error) listener(error);
  }

  /** A message from the worker to the primary. */
  say(message: WorkerToPrimary): void {
    for (const listener of this.listeners.message) listener(message);
  }

  exit(code: number | null, signal: string | null = null): void {
    if (this.exitedWith) return;
    this.exitedWith = { code, signal };
    this.connected = false;
    for (const listener of this.listeners.exit) listener(code, signal);
  }

  /** Control messages of one kind the primary sent. */
  sentOf<K extends PrimaryToWorker['fp']>(fp: K): Array<Extract<PrimaryToWorker, { fp: K }>> {
    return this.sent.filter((message): message is Extract<PrimaryToWorker, { fp: K }> => message.fp === fp);
  }
}

/** A fork port handing out fake workers (pids from 1 000); `failNext` makes the next forks throw. */
export class FakeForkPort implements ForkPort {
  readonly workers: FakeWorker[] = [];
  private nextPid = 1_000;
  private failures = 0;

  forkWorker(env: Record<string, string>): FakeWorker {
    if (this.failures > 0) {
      this.failures--;
      throw new Error('spawn EAGAIN');
    }
    const worker = new FakeWorker(this.nextPid++, env);
    this.workers.push(worker);
    return worker;
  }

  failNext(count: number): void {
    this.failures = count;
  }

  /** The workers forked for one slot, oldest first. */
  ofSlot(slot: number): FakeWorker[] {
    return this.workers.filter((worker) => worker.env.FLEETPLANE_INTERNAL_WORKER === String(slot));
  }

  get alive(): FakeWorker[] {
    return this.workers.filter((worker) => !worker.exitedWith);
  }
}

export type FakeRecord = WorkerRecord & { worker: FakeWorker; settleReady(ready: boolean): void };

/**
 * A record around a fake worker, for coordinators that are handed records: `exited` settles on the worker's
 * exit, `ready` when the test calls `settleReady` (false on exit).
 */
export function fakeRecord(slot: number, fields: Partial<Pick<WorkerRecord, 'status' | 'readyAt' | 'lastBeatAt' | 'retiring' | 'replacing'>> = {}, pid = 100 + slot): FakeRecord {
  const worker = new FakeWorker(pid);
  const rpc: PrimaryEnd = new RpcChannel((message) => worker.send(message));
  let markReady: (ready: boolean) => void = () => {};
  const record = {
    slot,
    pid,
    worker,
    status: 'ready' as WorkerStatus,
    forkedAt: 0,
    lastBeatAt: 0,
    beats: { laggyBeats: 0 },
    acked: false,
    handOffs: new Map(),
    ready: new Promise<boolean>((resolve) => (markReady = resolve)),
    exited: new Promise<void>((resolve) => worker.onExit(() => resolve())),
    rpc,
    endpoint: { workerId: slot, pid, connected: true, post: () => {}, rpc },
    settleReady: (ready: boolean) => markReady(ready),
    ...fields,
  };
  worker.onExit(() => markReady(false));
  return record;
}

/** A connection handle that remembers whether the primary closed its copy. */
export function fakeConnection(): ConnectionHandle & { closed: boolean } {
  return {
    closed: false,
    close() {
      this.closed = true;
    },
  };
}
