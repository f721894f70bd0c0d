import type { WorkerEndpoint } from '../../src/runtime/channels.js';
import type { ChannelMessage } from '../../src/runtime/messages.js';
import { RpcChannel } from '../../src/runtime/rpc.js';
import type { Clock } from '../../src/runtime/clock.js';
import { StorageAuthority, type AuthorityChannels } from '../../src/storage/authority.js';
import type { ClusterStorage, StorageLog } from '../../src/storage/cluster-storage.js';
import { StorageReplica, type ReplicaRuntime } from '../../src/storage/replica.js';
import type { JsonValue } from '../../src/storage/json-value.js';
import type { EventRecord } from './history.js';

/** Copies a payload the way the JSON-serialized IPC channel does. */
const overTheWire = (payload: unknown): unknown => (payload === undefined ? undefined : JSON.parse(JSON.stringify(payload)));

export class RecordingLog implements StorageLog {
  readonly warnings: Array<{ details: object; message: string }> = [];
  readonly errors: Array<{ details: object; message: string }> = [];
  warn(details: object, message: string): void {
    this.warnings.push({ details, message });
  }
  error(details: object, message: string): void {
    this.errors.push({ details, message });
  }
}

/**
 * One fake worker: a replica whose channel to the primary delivers asynchronously and in order, like IPC.
 * `toWorker` records every message the primary sent it; `dropNextToWorker` loses one (a fault to recover from).
 */
export class FakeWorker implements ReplicaRuntime {
  readonly replica: StorageReplica;
  readonly toWorker: unknown[] = [];
  readonly toPrimary: unknown[] = [];
  readonly log = new RecordingLog();
  dropNextToWorker = false;
  connected = true;
  readonly endpoint: WorkerEndpoint;
  private channelHandler?: (payload: unknown) => void;
  private readonly gates: Array<() => Promise<void>> = [];

  constructor(
    readonly workerId: number,
    private readonly deliverToPrimary: (from: WorkerEndpoint, payload: unknown) => void,
    options: { clock?: Clock; requestTimeoutMs?: number } = {},
  ) {
    const worker = this;
    this.endpoint = {
      workerId,
      pid: 1000 + workerId,
      get connected() {
        return worker.connected;
      },
      post: (message) => this.deliverToWorker(message as ChannelMessage),
      // Storage speaks on its own channel only: no request of this worker is ever answered.
      rpc: new RpcChannel(() => undefined),
    };
    this.replica = new StorageReplica(this, this.log, options);
  }

  onChannel(_channel: string, handler: (payload: unknown) => void): void {
    this.channelHandler = handler;
  }

  sendChannel(_channel: string, payload: unknown): void {
    this.toPrimary.push(payload);
    const copy = overTheWire(payload);
    setImmediate(() => this.deliverToPrimary(this.endpoint, copy));
  }

  beforeReady(gate: () => Promise<void>): void {
    this.gates.push(gate);
  }

  /** What `WorkerRuntime.bind` does with the gates: the worker is ready once they resolve. */
  async becomeReady(): Promise<void> {
    for (const gate of this.gates) await gate();
  }

  /** Hands the replica a message as if the primary had sent it. */
  inject(payload: unknown): void {
    this.channelHandler?.(overTheWire(payload));
  }

  private deliverToWorker(message: ChannelMessage): void {
    this.toWorker.push(message.payload);
    if (this.dropNextToWorker) {
      this.dropNextToWorker = false;
      return;
    }
    const copy = overTheWire(message.payload);
    setImmediate(() => this.channelHandler?.(copy));
  }
}

/** A primary's storage authority over in-memory channels, and any number of fake workers. */
export class FakeCluster implements AuthorityChannels {
  readonly log = new RecordingLog();
  readonly authority: StorageAuthority;
  readonly workers: FakeWorker[] = [];
  private handler?: (from: WorkerEndpoint, payload: unknown) => void;
  private readonly connectListeners: Array<(endpoint: WorkerEndpoint) => void> = [];
  private readonly disconnectListeners: Array<(endpoint: WorkerEndpoint) => void> = [];

  constructor() {
    this.authority = new StorageAuthority(this, this.log);
  }

  on(_channel: string, handler: (from: WorkerEndpoint, payload: unknown) => void): void {
    this.handler = handler;
  }

  send(endpoint: WorkerEndpoint, channel: string, payload: unknown): boolean {
    if (!endpoint.connected) return false;
    endpoint.post({ fp: 'ch', channel, payload });
    return true;
  }

  onConnect(listener: (endpoint: WorkerEndpoint) => void): void {
    this.connectListeners.push(listener);
  }

  onDisconnect(listener: (endpoint: WorkerEndpoint) => void): void {
    this.disconnectListeners.push(listener);
  }

  /** Every refusal is recorded here (the real channels rate-limit the lines they write). */
  refuse(from: WorkerEndpoint, where: string, reason: string): void {
    this.log.warn({ worker: from.workerId, where, reason }, 'refused a malformed message from a worker');
  }

  /**
   * Starts a worker; `ready` false leaves it booting, its channel listener not yet installed, for the test
   * to `listen` and run its ready gate.
   */
  async addWorker(options: { ready?: boolean; clock?: Clock; requestTimeoutMs?: number } = {}): Promise<FakeWorker> {
    const worker = new FakeWorker(this.workers.length + 1, (from, payload) => this.receive(from, payload), options);
    this.workers.push(worker);
    if (options.ready ?? true) {
      this.listen(worker);
      await worker.becomeReady();
    }
    return worker;
  }

  /** The worker's listener is installed: what `PrimaryChannels` reports on `CHANNELS_READY`. */
  listen(worker: FakeWorker): void {
    for (const listener of this.connectListeners) listener(worker.endpoint);
  }

  /** A payload arriving from `from`, exactly as the primary's message handler would pass it on. */
  receive(from: WorkerEndpoint, payload: unknown): void {
    this.handler?.(from, payload);
  }

  disconnect(worker: FakeWorker): void {
    worker.connected = false;
    for (const listener of this.disconnectListeners) listener(worker.endpoint);
  }
}

/** Records the SPEC 4.1 events of `keys` (and `clear`) as one sequence. */
export function recordEvents(storage: ClusterStorage, keys: string[]): EventRecord[] {
  const events: EventRecord[] = [];
  for (const key of keys) {
    storage.on(`change:${key}`, (value, oldValue, { revision }) => events.push({ revision, event: `change:${key}`, value, oldValue }));
    storage.on(`delete:${key}`, (oldValue, { revision }) => events.push({ revision, event: `delete:${key}`, oldValue }));
  }
  storage.on('clear', ({ revision }) => events.push({ revision, event: 'clear' }));
  return events;
}

export async function entriesOf(storage: ClusterStorage): Promise<Array<[string, JsonValue | undefined]>> {
  const keys = (await storage.keys()).sort();
  return Promise.all(keys.map(async (key) => [key, await storage.get(key)] as [string, JsonValue | undefined]));
}

/** Lets every message in flight through the fake channels arrive (a few macrotask turns). */
export async function flush(turns = 5): Promise<void> {
  for (let turn = 0; turn < turns; turn++) await new Promise((resolve) => setImmediate(resolve));
}
