import type { WorkerEndpoint } from '../runtime/channels.js';
import { ClusterStorage, type StorageLog } from './cluster-storage.js';
import { StorageError } from './errors.js';
import { checkKey, toStoredValue, type JsonValue } from './json-value.js';
import { STORAGE_CHANNEL, isWorkerRequest, requestIdOf, type PrimaryMessage, type StorageMutation, type WorkerRequest } from './messages.js';

/** The part of `PrimaryChannels` the authority uses. */
export interface AuthorityChannels {
  on(channel: string, handler: (from: WorkerEndpoint, payload: unknown) => void): void;
  send(endpoint: WorkerEndpoint, channel: string, payload: unknown): boolean;
  onConnect(listener: (endpoint: WorkerEndpoint) => void): void;
  /** Tells of a message refused, rate-limited. */
  refuse(from: WorkerEndpoint, where: string, reason: string): void;
  onDisconnect(listener: (endpoint: WorkerEndpoint) => void): void;
}

type MutationDraft =
  | { kind: 'set'; key: string; value: JsonValue }
  | { kind: 'delete'; key: string }
  | { kind: 'clear' };

interface Outcome {
  /** The authority's revision after the operation: the caller's replica must reach it before resolving. */
  revision: number;
  result: number | boolean;
  /** The writer's copy of the mutation carried the answer; no separate reply is needed. */
  answered: boolean;
}

/** The worker request a mutation answers, if it came from a worker. */
interface Writer {
  endpoint: WorkerEndpoint;
  requestId: number;
}

/**
 * SPEC 4.2, primary side: the one copy that decides. Mutations — from workers in arrival order, from the
 * primary in call order — are applied one at a time, each numbered with the next revision and sent to every
 * synced worker; the writer's copy carries the answer to its request (a no-op gets a plain reply, sent after
 * every earlier mutation on the same ordered channel), so the writer's replica reflects the write when it
 * hears back.
 */
export class StorageAuthority extends ClusterStorage {
  /** Workers that received a snapshot; only they get mutations, which follow that snapshot on their channel. */
  private readonly subscribers = new Set<WorkerEndpoint>();
  private readonly queue: Array<() => void> = [];
  private draining = false;

  constructor(
    private readonly channels: AuthorityChannels,
    log: StorageLog,
  ) {
    super(log);
    channels.on(STORAGE_CHANNEL, (from, payload) => this.receive(from, payload));
    // A worker gets its snapshot as soon as it listens, in order with the mutations: it never has to ask.
    channels.onConnect((endpoint) => this.inOrder(() => this.subscribe(endpoint)));
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

  private commit(draft: MutationDraft): Promise<Outcome> {
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
        (made) => made.then((result) => resolve({ revision: this.revision, result, answered: false }), (error: Error) => reject(movedError(error))),
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

  private process(draft: MutationDraft, writer?: Writer): Outcome {
    if (draft.kind === 'delete' && !this.entries.has(draft.key)) return { revision: this.revision, result: false, answered: false };
    if (draft.kind === 'clear' && this.entries.size === 0) return { revision: this.revision, result: false, answered: false };
    const mutation = { ...draft, revision: this.revision + 1 } as StorageMutation;
    const applied = this.apply(mutation);
    const message: PrimaryMessage = { type: 'mutation', mutation };
    let answered = false;
    for (const endpoint of this.subscribers) {
      // The writer's copy doubles as the answer: one message fewer per write, and it cannot overtake the change.
      if (endpoint === writer?.endpoint) answered = this.channels.send(endpoint, STORAGE_CHANNEL, { ...message, replyTo: writer.requestId });
      else this.channels.send(endpoint, STORAGE_CHANNEL, message);
    }
    this.emitApplied(applied);
    return { revision: mutation.revision, result: draft.kind === 'set' ? mutation.revision : true, answered };
  }

  private receive(from: WorkerEndpoint, payload: unknown): void {
    // This runs in the primary's message handler: nothing a worker sends may throw out of it.
    try {
      if (!isWorkerRequest(payload)) {
        this.channels.refuse(from, 'storage', 'malformed storage request');
        const id = requestIdOf(payload);
        if (id !== undefined) this.replyError(from, id, new StorageError('E_STORAGE_BAD_MESSAGE', 'malformed storage request'));
        return;
      }
      this.serve(from, payload);
    } catch (error) {
      this.log.error({ err: error, worker: from.workerId }, 'storage request failed');
      const id = requestIdOf(payload);
      if (id !== undefined) this.replyError(from, id, error instanceof StorageError ? error : new StorageError('E_STORAGE_INTERNAL', 'storage request failed'));
    }
  }

  private serve(from: WorkerEndpoint, request: WorkerRequest): void {
    if (request.op === 'sync') {
      this.inOrder(() => this.subscribe(from, request.id));
      return;
    }
    let draft: MutationDraft;
    try {
      draft = this.draftFrom(request);
    } catch (error) {
      if (!(error instanceof StorageError)) throw error;
      this.replyError(from, request.id, error);
      return;
    }
    this.admit(
      draft,
      () => {
        const { revision, result, answered } = this.process(draft, { endpoint: from, requestId: request.id });
        if (!answered) this.send(from, { type: 'reply', id: request.id, ok: true, revision, result });
      },
      (made) =>
        made.then(
          (result) => this.send(from, { type: 'reply', id: request.id, ok: true, revision: this.revision, result }),
          (error: Error) => this.replyError(from, request.id, movedError(error)),
        ),
    );
  }

  /** Mutations after this snapshot follow it on the same ordered channel. */
  private subscribe(endpoint: WorkerEndpoint, requestId?: number): void {
    this.subscribers.add(endpoint);
    this.send(endpoint, { type: 'snapshot', ...(requestId === undefined ? {} : { id: requestId }), revision: this.revision, entries: [...this.entries] });
  }

  private draftFrom(request: Exclude<WorkerRequest, { op: 'sync' }>): MutationDraft {
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

  private replyError(to: WorkerEndpoint, id: number, error: StorageError): void {
    this.send(to, { type: 'reply', id, ok: false, error: { code: error.code, message: error.message } });
  }

  private send(to: WorkerEndpoint, message: PrimaryMessage): void {
    this.channels.send(to, STORAGE_CHANNEL, message);
  }
}

/** A write made on the new primary failed there (or could not reach it); storage errors keep their code. */
function movedError(error: Error): StorageError {
  return error instanceof StorageError ? error : new StorageError('E_STORAGE_UNAVAILABLE', `the write was not made on the new primary: ${error.message}`, { cause: error });
}
