import type { PrimaryApi } from '../runtime/protocol.js';
import type { WorkerEnd } from '../runtime/rpc.js';
import { RpcRemoteError, RpcUnanswered } from '../runtime/rpc.js';
import { ClusterStorage, type StorageLog } from './cluster-storage.js';
import { STORAGE_ERROR_CODES, StorageError, type StorageErrorCode } from './errors.js';
import { checkKey, freezeJson, toStoredValue, type JsonValue } from './json-value.js';
import { STORAGE_METHODS, type StorageMutation, type StorageSnapshot, type StorageWrite, type WriteAnswer } from './messages.js';

/** The part of `WorkerRuntime` the replica uses: its channel to the primary, and its ready gates. */
export interface ReplicaRuntime {
  readonly rpc: Pick<WorkerEnd, 'call' | 'handle'>;
  beforeReady(gate: () => Promise<void>): void;
}

export interface StorageReplicaOptions {
  /** How long a request may wait for the primary's answer (default 30 s). */
  requestTimeoutMs?: number;
}

/**
 * SPEC 4.2, worker side: a copy of the primary's entries, loaded from the snapshot the primary pushes when
 * the worker starts listening (before the worker reports ready), then advanced strictly one revision at a time. Writes go to the primary; each resolves once this
 * replica has applied the primary's revision at the time of the answer (read-your-writes).
 */
export class StorageReplica extends ClusterStorage {
  private readonly revisionWaiters: Array<{ revision: number; resume: () => void }> = [];
  private loaded = false;
  private firstLoaded!: () => void;
  private resyncing = false;
  private readonly firstSnapshot: Promise<void>;
  private readonly requestTimeoutMs: number;

  constructor(
    private readonly runtime: ReplicaRuntime,
    log: StorageLog,
    options: StorageReplicaOptions = {},
  ) {
    super(log);
    this.requestTimeoutMs = options.requestTimeoutMs ?? 30_000;
    // The parameters' shape is checked by the protocol before these run.
    runtime.rpc.handle(STORAGE_METHODS.snapshot, (params) => this.load(params as StorageSnapshot));
    runtime.rpc.handle(STORAGE_METHODS.mutation, (params) => this.onMutation(params as StorageMutation));
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

  /** A new snapshot: the primary sends it before it answers, and every later mutation after it. */
  private async sync(): Promise<void> {
    await this.call(STORAGE_METHODS.sync, {}, 'sync');
  }

  private async request(operation: StorageWrite): Promise<number | boolean> {
    const { revision, result }: WriteAnswer = await this.call(STORAGE_METHODS.write, operation, operation.op);
    // Every mutation up to `revision` was sent before this answer on the same ordered channel, so this resolves
    // at once unless a resync dropped them; then it resolves when the snapshot arrives.
    await new Promise<void>((resume) => this.afterRevision(revision, resume));
    return result;
  }

  /** A request to the primary; what it answers or fails with is a storage error with the primary's code. */
  private async call<M extends typeof STORAGE_METHODS.write | typeof STORAGE_METHODS.sync>(method: M, params: PrimaryApi[M]['params'], what: string): Promise<PrimaryApi[M]['result']> {
    try {
      return await this.runtime.rpc.call(method, params, this.requestTimeoutMs);
    } catch (error) {
      throw storageErrorOf(error, what, this.requestTimeoutMs);
    }
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
    // The snapshot ends the resync when it arrives (`load`): mutations right behind it must not be dropped.
    this.sync().catch(
      (error: unknown) => {
        // The next mutation finds the gap again and retries.
        this.resyncing = false;
        this.log.error({ err: error }, 'storage resync failed');
      },
    );
  }

  private load(snapshot: StorageSnapshot): void {
    this.resyncing = false;
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

const STORAGE_CODES = new Set<string>(STORAGE_ERROR_CODES);

/** The storage error a failed request to the primary comes to. */
function storageErrorOf(error: unknown, what: string, timeoutMs: number): StorageError {
  if (error instanceof RpcUnanswered) {
    return error.code === 'rpc_timeout'
      ? new StorageError('E_STORAGE_TIMEOUT', `the primary did not answer storage ${what} within ${timeoutMs} ms`)
      : new StorageError('E_STORAGE_UNAVAILABLE', 'cannot reach the primary', { cause: error });
  }
  if (error instanceof RpcRemoteError) {
    if (error.code !== undefined && STORAGE_CODES.has(error.code)) return new StorageError(error.code as StorageErrorCode, error.message);
    // Refused by the protocol before the storage saw it: a request this side built wrong.
    return new StorageError('E_STORAGE_BAD_MESSAGE', error.message);
  }
  return new StorageError('E_STORAGE_INTERNAL', `storage ${what} failed`, { cause: error });
}
