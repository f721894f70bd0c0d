import type { AnswerWorkers, WorkerEndpoint } from '../../src/runtime/channels.js';
import type { RpcCall, RpcReply } from '../../src/runtime/messages.js';
import { primaryMethodChecks, primaryResultChecks, workerMethodChecks, workerResultChecks, type PrimaryMethod, type WorkerApi, type WorkerMethod } from '../../src/runtime/protocol.js';
import { RpcChannel, type PrimaryEnd, type WorkerEnd } from '../../src/runtime/rpc.js';
import type { Clock } from '../../src/runtime/clock.js';
import { StorageAuthority, type AuthorityChannels } from '../../src/storage/authority.js';
import type { ClusterStorage, StorageLog } from '../../src/storage/cluster-storage.js';
import { StorageReplica, type ReplicaRuntime } from '../../src/storage/replica.js';
import type { JsonValue } from '../../src/storage/json-value.js';
import type { EventRecord } from './history.js';

type Message = RpcCall | RpcReply;

/** Copies a message the way the JSON-serialized IPC channel does. */
const overTheWire = <T>(message: T): T => JSON.parse(JSON.stringify(message)) as T;

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
 * One fake worker: a replica and the primary's end of its channel, two `RpcChannel`s checked by the protocol
 * whose messages arrive asynchronously and in order, like IPC. `toWorker` and `toPrimary` record every message
 * sent each way; `dropNextToWorker` loses one (a fault to recover from).
 */
export class FakeWorker implements ReplicaRuntime {
  readonly replica: StorageReplica;
  readonly toWorker: Message[] = [];
  readonly toPrimary: Message[] = [];
  readonly log = new RecordingLog();
  dropNextToWorker = false;
  connected = true;
  /** The worker's end: what the replica calls through and is notified on. */
  readonly rpc: WorkerEnd;
  /** The primary's end, as the authority sees this worker. */
  readonly endpoint: WorkerEndpoint;
  private readonly primaryEnd: PrimaryEnd;
  private readonly gates: Array<() => Promise<void>> = [];

  constructor(
    readonly workerId: number,
    private readonly cluster: FakeCluster,
    options: { clock?: Clock; requestTimeoutMs?: number } = {},
  ) {
    const worker = this;
    this.rpc = new RpcChannel((message) => this.deliverToPrimary(message), {
      methods: workerMethodChecks,
      results: primaryResultChecks,
      clock: options.clock,
      refused: (reason) => this.log.warn({ reason }, 'refused a malformed message from the primary'),
    });
    this.primaryEnd = new RpcChannel((message) => this.deliverToWorker(message), {
      methods: primaryMethodChecks,
      results: workerResultChecks,
      refused: (reason) => cluster.log.warn({ worker: workerId, reason }, 'refused a malformed message from a worker'),
    });
    this.endpoint = {
      workerId,
      pid: 1000 + workerId,
      get connected() {
        return worker.connected;
      },
      rpc: this.primaryEnd,
    };
    for (const [method, handler] of cluster.answers) this.primaryEnd.handle(method, (params) => handler(params, this.endpoint));
    this.replica = new StorageReplica(this, this.log, options);
  }

  beforeReady(gate: () => Promise<void>): void {
    this.gates.push(gate);
  }

  /** What `WorkerRuntime.bind` does with the gates: the worker is ready once they resolve. */
  async becomeReady(): Promise<void> {
    for (const gate of this.gates) await gate();
  }

  /** Hands the replica a notification as if the primary had sent it. */
  inject(method: string, params: unknown): void {
    void this.rpc.receive(overTheWire({ fp: 'rpc', id: 0, method, params }));
  }

  /** A request of this worker's, as it arrives at the primary (`params` anything a worker's code could send, as is). */
  callPrimary(id: number, method: string, params: unknown): void {
    void this.primaryEnd.receive({ fp: 'rpc', id, method, params });
  }

  private deliverToPrimary(message: Message): void {
    this.toPrimary.push(message);
    const copy = overTheWire(message);
    setImmediate(() => {
      if (this.cluster.answering) void this.primaryEnd.receive(copy);
    });
  }

  private deliverToWorker(message: Message): void {
    this.toWorker.push(message);
    if (this.dropNextToWorker) {
      this.dropNextToWorker = false;
      return;
    }
    const copy = overTheWire(message);
    setImmediate(() => void this.rpc.receive(copy));
  }
}

/** A primary's storage authority over in-memory channels, and any number of fake workers. */
export class FakeCluster implements AuthorityChannels {
  readonly log = new RecordingLog();
  readonly authority: StorageAuthority;
  readonly workers: FakeWorker[] = [];
  /** What the primary answers its workers (the storage's methods). */
  readonly answers = new Map<PrimaryMethod, (params: unknown, from: WorkerEndpoint) => unknown>();
  /** False: the primary stops answering (what workers send is lost). */
  answering = true;
  private readonly connectListeners: Array<(endpoint: WorkerEndpoint) => void> = [];
  private readonly disconnectListeners: Array<(endpoint: WorkerEndpoint) => void> = [];

  constructor() {
    const answer: AnswerWorkers = (method, handler) => this.answers.set(method, handler);
    this.authority = new StorageAuthority(this, answer, this.log);
  }

  notify<M extends WorkerMethod>(endpoint: WorkerEndpoint, method: M, params: WorkerApi[M]['params']): boolean {
    if (!endpoint.connected) return false;
    endpoint.rpc.notify(method, params);
    return true;
  }

  onConnect(listener: (endpoint: WorkerEndpoint) => void): void {
    this.connectListeners.push(listener);
  }

  onDisconnect(listener: (endpoint: WorkerEndpoint) => void): void {
    this.disconnectListeners.push(listener);
  }

  /**
   * Starts a worker; `ready` false leaves it booting, not yet listening, for the test to `listen` and run its
   * ready gate.
   */
  async addWorker(options: { ready?: boolean; clock?: Clock; requestTimeoutMs?: number } = {}): Promise<FakeWorker> {
    const worker = new FakeWorker(this.workers.length + 1, this, options);
    this.workers.push(worker);
    if (options.ready ?? true) {
      this.listen(worker);
      await worker.becomeReady();
    }
    return worker;
  }

  /** The worker listens: what `PrimaryChannels` reports on its `{ fp: 'listening' }`. */
  listen(worker: FakeWorker): void {
    for (const listener of this.connectListeners) listener(worker.endpoint);
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
