import type { AnswerWorkers, PrimaryChannels, WorkerEndpoint } from '../runtime/channels.js';
import { ClusterStorage, type StorageLog } from './cluster-storage.js';
import { StorageError } from './errors.js';
import { checkKey, toStoredValue, type JsonValue } from './json-value.js';
import { STORAGE_METHODS, type StorageMutation, type StorageSnapshot, type StorageWrite, type WriteAnswer } from './messages.js';

/** The part of `PrimaryChannels` the authority uses. */
export interface AuthorityChannels {
  notify: PrimaryChannels['notify'];
  onConnect(listener: (endpoint: WorkerEndpoint) => void): void;
  onDisconnect(listener: (endpoint: WorkerEndpoint) => void): void;
}

type MutationDraft =
  | { kind: 'set'; key: string; value: JsonValue }
  | { kind: 'delete'; key: string }
  | { kind: 'clear' };

/**
 * SPEC 4.2, primary side: the one copy that decides. Mutations — from workers in arrival order, from the
 * primary in call order — are applied one at a time, each numbered with the next revision and sent to every
 * synced worker (`worker.storage.mutation`); a worker's write is answered after its mutation was sent on the
 * same ordered channel, so the writer's replica reflects the write when it hears back.
 */
export class StorageAuthority extends ClusterStorage {
  /** Workers that received a snapshot; only they get mutations, which follow that snapshot on their channel. */
  private readonly subscribers = new Set<WorkerEndpoint>();
  private readonly queue: Array<() => void> = [];
  private draining = false;

  constructor(
    private readonly channels: AuthorityChannels,
    answer: AnswerWorkers,
    log: StorageLog,
  ) {
    super(log);
    // The parameters' shape is checked by the protocol before these run; keys and values here.
    answer(STORAGE_METHODS.write, (params, from) => this.write(from, params as StorageWrite));
    answer(STORAGE_METHODS.sync, (_params, from) => this.resubscribe(from));
    // A worker gets its snapshot as soon as it listens, in order with the mutations: it never has to ask. The
    // primary's own worker runtime (single-process mode) serves with this storage itself.
    channels.onConnect((endpoint) => {
      if (!endpoint.inProcess) this.inOrder(() => this.subscribe(endpoint));
    });
    channels.onDisconnect((endpoint) => this.subscribers.delete(endpoint));
  }

  async set(key: string, value: JsonValue): Promise<number> {
    checkKey(key);
    const stored = toStoredValue(value);
    return (await this.commit({ kind: 'set', key, value: stored })).result as number;
  }

  async delete(key: string): Promise<boolean> {
    checkKey(key);
    return (await this.commit({ kind: 'delete', key })).result as boolean;
  }

  async clear(): Promise<boolean> {
    return (await this.commit({ kind: 'clear' })).result as boolean;
  }

  protected readable(): void {}

  /** Makes `draft` (here, or on the new primary during a hand-over) and answers with its result and revision. */
  private commit(draft: MutationDraft): Promise<WriteAnswer> {
    return new Promise((resolve, reject) =>
      this.admit(
        draft,
        () => {
          try {
            resolve(this.process(draft));
          } catch (error) {
            reject(error);
          }
        },
        (made) => made.then((result) => resolve({ revision: this.revision, result }), (error: Error) => reject(movedError(error))),
      ),
    );
  }

  /**
   * Where a mutation is made: here, in order; or, during a hand-over (SPEC 1.10), held until the new primary
   * takes over (then made there, `elsewhere`) or the hand-over is aborted (then made here after all).
   */
  private admit(draft: MutationDraft, here: () => void, elsewhere: (made: Promise<number | boolean>) => void): void {
    if (this.forward) return elsewhere(this.forward(draft));
    if (this.held) {
      this.held.push(() => this.admit(draft, here, elsewhere));
      return;
    }
    this.inOrder(here);
  }

  private held: Array<() => void> | undefined;
  private forward: ((draft: MutationDraft) => Promise<number | boolean>) | undefined;

  /** @internal hand-over, old primary: the entries as of now; every mutation from here on waits. */
  freeze(): { revision: number; entries: Array<[string, JsonValue]> } {
    this.held ??= [];
    return { revision: this.revision, entries: [...this.entries] };
  }

  /** @internal hand-over aborted: the waiting mutations are made here, in their order. */
  thaw(): void {
    this.release();
  }

  /**
   * @internal hand-over committed: the new primary is the authority. The waiting mutations and every later one
   * (the draining workers') are made there, in order; this process's replicas keep the entries of the hand-over.
   */
  forwardTo(write: (draft: MutationDraft) => Promise<number | boolean>): void {
    this.forward = write;
    this.release();
  }

  private release(): void {
    const held = this.held ?? [];
    this.held = undefined;
    for (const step of held) step();
  }

  /** @internal hand-over, new primary: the old primary's entries, taken before any worker subscribed. */
  seed(snapshot: { revision: number; entries: Array<[string, unknown]> }): void {
    if (this.subscribers.size > 0 || this.revision > 0) throw new Error('storage is seeded before any worker subscribes');
    for (const [key, value] of snapshot.entries) this.entries.set(key, toStoredValue(value as JsonValue));
    this.appliedRevision = snapshot.revision;
  }

  /** @internal hand-over, new primary: a mutation of the old primary's draining workers. */
  applyForwarded(draft: unknown): Promise<number | boolean> {
    const { kind, key, value } = (draft ?? {}) as { kind?: unknown; key?: unknown; value?: unknown };
    if (kind === 'clear') return this.clear();
    if (typeof key !== 'string') return Promise.reject(new StorageError('E_STORAGE_BAD_MESSAGE', 'a forwarded mutation needs a key'));
    if (kind === 'set') return this.set(key, value as JsonValue);
    if (kind === 'delete') return this.delete(key);
    return Promise.reject(new StorageError('E_STORAGE_BAD_MESSAGE', 'a forwarded mutation is set, delete or clear'));
  }

  /**
   * Runs `step` after every step already queued. A listener that writes from inside an event is queued
   * behind the mutation being emitted, so every process sees the two in the same order and every listener
   * sees the entries as of the event's revision.
   */
  private inOrder(step: () => void): void {
    this.queue.push(step);
    if (this.draining) return;
    this.draining = true;
    for (let next = this.queue.shift(); next; next = this.queue.shift()) {
      try {
        next();
      } catch (error) {
        this.log.error({ err: error }, 'storage step failed');
      }
    }
    this.draining = false;
  }

  private process(draft: MutationDraft): WriteAnswer {
    if (draft.kind === 'delete' && !this.entries.has(draft.key)) return { revision: this.revision, result: false };
    if (draft.kind === 'clear' && this.entries.size === 0) return { revision: this.revision, result: false };
    const mutation = { ...draft, revision: this.revision + 1 } as StorageMutation;
    const applied = this.apply(mutation);
    for (const endpoint of this.subscribers) this.channels.notify(endpoint, STORAGE_METHODS.mutation, mutation);
    this.emitApplied(applied);
    return { revision: mutation.revision, result: draft.kind === 'set' ? mutation.revision : true };
  }

  /**
   * A worker's write: its key and value checked here (a refusal answers the precise storage error), then made
   * in order. The answer goes out after the mutation was sent to every synced worker, the writer included.
   */
  private write(from: WorkerEndpoint, request: StorageWrite): Promise<WriteAnswer> {
    let draft: MutationDraft;
    try {
      draft = draftFrom(request);
    } catch (error) {
      if (error instanceof StorageError) return Promise.reject(error);
      this.log.error({ err: error, worker: from.workerId }, 'storage request failed');
      return Promise.reject(new StorageError('E_STORAGE_INTERNAL', 'storage request failed'));
    }
    return this.commit(draft);
  }

  /** A worker's replica found a revision gap: a new snapshot, sent before this answers, mutations after it. */
  private resubscribe(endpoint: WorkerEndpoint): { revision: number } {
    this.inOrder(() => this.subscribe(endpoint));
    return { revision: this.revision };
  }

  /** Mutations after this snapshot follow it on the same ordered channel. */
  private subscribe(endpoint: WorkerEndpoint): void {
    this.subscribers.add(endpoint);
    const snapshot: StorageSnapshot = { revision: this.revision, entries: [...this.entries] };
    this.channels.notify(endpoint, STORAGE_METHODS.snapshot, snapshot);
  }
}

function draftFrom(request: StorageWrite): MutationDraft {
  switch (request.op) {
    case 'set':
      checkKey(request.key);
      return { kind: 'set', key: request.key, value: toStoredValue(request.value) };
    case 'delete':
      checkKey(request.key);
      return { kind: 'delete', key: request.key };
    case 'clear':
      return { kind: 'clear' };
  }
}

/** A write made on the new primary failed there (or could not reach it); storage errors keep their code. */
function movedError(error: Error): StorageError {
  return error instanceof StorageError ? error : new StorageError('E_STORAGE_UNAVAILABLE', `the write was not made on the new primary: ${error.message}`, { cause: error });
}
