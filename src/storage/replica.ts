import { systemClock, type Clock } from '../runtime/clock.js';
import { ClusterStorage, type StorageLog } from './cluster-storage.js';
import { StorageError } from './errors.js';
import { checkKey, freezeJson, toStoredValue, type JsonValue } from './json-value.js';
import { STORAGE_CHANNEL, isPrimaryMessage, type PrimaryMessage, type StorageMutation, type WorkerRequest } from './messages.js';

/** The part of `WorkerRuntime` the replica uses. */
export interface ReplicaRuntime {
  onChannel(channel: string, handler: (payload: unknown) => void): void;
  sendChannel(channel: string, payload: unknown): void;
  beforeReady(gate: () => Promise<void>): void;
}

export interface StorageReplicaOptions {
  clock?: Clock;
  /** How long a request may wait for the primary's answer (default 30 s). */
  requestTimeoutMs?: number;
}

type Snapshot = Extract<PrimaryMessage, { type: 'snapshot' }>;

type Answer = Exclude<PrimaryMessage, { type: 'mutation' }>;

/**
 * SPEC 4.2, worker side: a copy of the primary's entries, loaded from the snapshot the primary pushes when
 * the worker starts listening (before the worker reports ready), then advanced strictly one revision at a time. Writes go to the primary; each resolves once this
 * replica has applied the primary's revision at the time of the answer (read-your-writes).
 */
export class StorageReplica extends ClusterStorage {
  private nextRequestId = 1;
  private readonly pending = new Map<number, { answer(message: Answer): void }>();
  private readonly revisionWaiters: Array<{ revision: number; resume: () => void }> = [];
  private loaded = false;
  private firstLoaded!: () => void;
  private resyncing = false;
  private readonly firstSnapshot: Promise<void>;
  private readonly clock: Clock;
  private readonly requestTimeoutMs: number;

  constructor(
    private readonly runtime: ReplicaRuntime,
    log: StorageLog,
    options: StorageReplicaOptions = {},
  ) {
    super(log);
    this.clock = options.clock ?? systemClock;
    this.requestTimeoutMs = options.requestTimeoutMs ?? 30_000;
    runtime.onChannel(STORAGE_CHANNEL, (payload) => this.receive(payload));
    // The primary pushes the first snapshot once this worker listens; operations called before wait for it,
    // and the worker is not ready without it.
    this.firstSnapshot = new Promise<void>((resolve) => (this.firstLoaded = resolve));
    runtime.beforeReady(() => this.firstSnapshot);
  }

  async set(key: string, value: JsonValue): Promise<number> {
    checkKey(key);
    const stored = toStoredValue(value);
    await this.firstSnapshot;
    return (await this.request({ op: 'set', key, value: stored })) as number;
  }

  async delete(key: string): Promise<boolean> {
    checkKey(key);
    await this.firstSnapshot;
    return (await this.request({ op: 'delete', key })) as boolean;
  }

  async clear(): Promise<boolean> {
    await this.firstSnapshot;
    return (await this.request({ op: 'clear' })) as boolean;
  }

  protected readable(): Promise<void> {
    return this.firstSnapshot;
  }

  private sync(): Promise<void> {
    return this.call({ op: 'sync' }, (message, done) => {
      if (message.type !== 'snapshot') throw new StorageError('E_STORAGE_BAD_MESSAGE', 'the primary answered a sync without a snapshot');
      this.load(message);
      done(undefined);
    });
  }

  private request(operation: { op: 'set'; key: string; value: JsonValue } | { op: 'delete'; key: string } | { op: 'clear' }): Promise<number | boolean> {
    return this.call(operation, (message, done) => {
      if (message.type !== 'reply') throw new StorageError('E_STORAGE_BAD_MESSAGE', 'the primary answered a write with a snapshot');
      if (!message.ok) throw new StorageError(message.error.code, message.error.message);
      // Every mutation up to `revision` was sent before this answer on the same ordered channel, so this
      // resolves at once unless a resync dropped them; then it resolves when the snapshot arrives.
      this.afterRevision(message.revision, () => done(message.result));
    });
  }

  private call<T>(
    operation: DistributiveOmit<WorkerRequest, 'id'>,
    onAnswer: (message: Answer, done: (value: T) => void) => void,
  ): Promise<T> {
    const id = this.nextRequestId++;
    return new Promise<T>((resolve, reject) => {
      const cancelTimeout = this.clock.setTimeout(() => {
        this.pending.delete(id);
        reject(new StorageError('E_STORAGE_TIMEOUT', `the primary did not answer storage ${operation.op} within ${this.requestTimeoutMs} ms`));
      }, this.requestTimeoutMs);
      this.pending.set(id, {
        answer: (message) => {
          cancelTimeout();
          try {
            onAnswer(message, resolve);
          } catch (error) {
            reject(error);
          }
        },
      });
      try {
        this.runtime.sendChannel(STORAGE_CHANNEL, { ...operation, id });
      } catch (error) {
        this.pending.delete(id);
        cancelTimeout();
        reject(new StorageError('E_STORAGE_UNAVAILABLE', 'cannot reach the primary', { cause: error }));
      }
    });
  }

  private receive(payload: unknown): void {
    if (!isPrimaryMessage(payload)) {
      this.log.error({}, 'malformed storage message from the primary');
      return;
    }
    if (payload.type === 'snapshot' && payload.id === undefined) {
      this.load(payload);
      return;
    }
    if (payload.type !== 'mutation') {
      this.answer(payload);
      return;
    }
    const { mutation, replyTo } = payload;
    this.onMutation(mutation);
    if (replyTo !== undefined) {
      this.answer({ type: 'reply', id: replyTo, ok: true, revision: mutation.revision, result: mutation.kind === 'set' ? mutation.revision : true });
    }
  }

  private answer(message: Answer): void {
    if (message.id === undefined) return;
    const request = this.pending.get(message.id);
    if (!request) return;
    this.pending.delete(message.id);
    request.answer(message);
  }

  private onMutation(mutation: StorageMutation): void {
    // Until a snapshot is loaded, every mutation sent so far is part of the snapshot on its way.
    if (!this.loaded || this.resyncing) return;
    if (mutation.revision <= this.revision) return;
    if (mutation.revision !== this.revision + 1) {
      this.log.error({ expected: this.revision + 1, received: mutation.revision }, 'storage revision gap: resyncing from a snapshot');
      this.resync();
      return;
    }
    if (mutation.kind === 'set') freezeJson(mutation.value);
    this.emitApplied(this.apply(mutation));
    this.wakeRevisionWaiters();
  }

  private resync(): void {
    this.resyncing = true;
    this.sync().then(
      () => (this.resyncing = false),
      (error: unknown) => {
        // The next mutation finds the gap again and retries.
        this.resyncing = false;
        this.log.error({ err: error }, 'storage resync failed');
      },
    );
  }

  private load(snapshot: Snapshot): void {
    if (snapshot.revision < this.revision) return;
    const previous = this.loaded ? new Map(this.entries) : undefined;
    this.entries.clear();
    for (const [key, value] of snapshot.entries) this.entries.set(key, freezeJson(value));
    this.appliedRevision = snapshot.revision;
    this.loaded = true;
    this.firstLoaded();
    if (previous) this.emitDifferences(previous, snapshot.revision);
    this.wakeRevisionWaiters();
  }

  /** After a resync, listeners hear what changed in between, though not each step in between. */
  private emitDifferences(previous: Map<string, JsonValue>, revision: number): void {
    const meta = { revision };
    for (const [key, value] of this.entries) {
      const oldValue = previous.get(key);
      if (oldValue === undefined || JSON.stringify(oldValue) !== JSON.stringify(value)) this.emitSafe(`change:${key}`, value, oldValue, meta);
    }
    for (const [key, oldValue] of previous) if (!this.entries.has(key)) this.emitSafe(`delete:${key}`, oldValue, meta);
  }

  private afterRevision(revision: number, resume: () => void): void {
    if (this.revision >= revision) resume();
    else this.revisionWaiters.push({ revision, resume });
  }

  private wakeRevisionWaiters(): void {
    if (this.revisionWaiters.length === 0) return;
    const due = this.revisionWaiters.filter((waiter) => waiter.revision <= this.revision);
    if (due.length === 0) return;
    this.revisionWaiters.splice(0, this.revisionWaiters.length, ...this.revisionWaiters.filter((waiter) => waiter.revision > this.revision));
    for (const waiter of due) waiter.resume();
  }
}

type DistributiveOmit<T, K extends PropertyKey> = T extends unknown ? Omit<T, K> : never;
