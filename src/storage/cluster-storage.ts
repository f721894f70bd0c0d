import { EventEmitter } from 'node:events';
import { checkKey, type JsonValue } from './json-value.js';
import type { StorageMutation } from './messages.js';

export interface StorageEventMeta {
  /** The revision of the mutation that caused the event; the same in every process. */
  revision: number;
}

export interface StorageClearMeta extends StorageEventMeta {
  /** The keys that were removed. */
  keys: string[];
}

/** Who hears about storage problems that must not reach callers (a throwing listener, a bad message). */
export interface StorageLog {
  warn(details: object, message: string): void;
  error(details: object, message: string): void;
}

type ChangeListener = (newValue: JsonValue, oldValue: JsonValue | undefined, meta: StorageEventMeta) => void;
type DeleteListener = (oldValue: JsonValue, meta: StorageEventMeta) => void;
type ClearListener = (meta: StorageClearMeta) => void;
type MutationListener = (mutation: StorageMutation) => void;

/** A mutation's effect on one process's entries, kept until its events are emitted. */
export interface AppliedMutation {
  mutation: StorageMutation;
  oldValue?: JsonValue;
  clearedKeys?: string[];
}

/**
 * SPEC 4: the key/value storage every process of a server shares. The primary's `StorageAuthority` orders
 * mutations; each worker's `StorageReplica` applies them in that order. Both emit, per mutation and in
 * revision order, `change:<key>` / `delete:<key>` / `clear`, then `mutation` (for observers of every key).
 * Every `set` takes a revision and fires `change:<key>`, even when the value equals the current one;
 * `delete` of a missing key and `clear` of empty storage take none and fire nothing (they resolve false).
 * Reads are local to the process. Values are deeply frozen: copy one before changing it.
 */
export abstract class ClusterStorage extends EventEmitter {
  protected readonly entries = new Map<string, JsonValue>();
  protected appliedRevision = 0;

  constructor(protected readonly log: StorageLog) {
    super({ captureRejections: false });
  }

  /** The revision of the last mutation this process applied (0: none yet). */
  get revision(): number {
    return this.appliedRevision;
  }

  /** Stores `value` under `key`; resolves with the mutation's revision once this process reflects it. */
  abstract set(key: string, value: JsonValue): Promise<number>;
  /** Resolves false, with no event and no revision, when the key is missing. */
  abstract delete(key: string): Promise<boolean>;
  /** Resolves false, with no event and no revision, when the storage is already empty. */
  abstract clear(): Promise<boolean>;

  /** Reads wait for this (a replica's first snapshot); it never rejects once it has resolved. */
  protected abstract readable(): Promise<void> | void;

  async get(key: string): Promise<JsonValue | undefined> {
    checkKey(key);
    await this.readable();
    return this.entries.get(key);
  }

  async has(key: string): Promise<boolean> {
    checkKey(key);
    await this.readable();
    return this.entries.has(key);
  }

  async size(): Promise<number> {
    await this.readable();
    return this.entries.size;
  }

  async keys(): Promise<string[]> {
    await this.readable();
    return [...this.entries.keys()];
  }

  protected apply(mutation: StorageMutation): AppliedMutation {
    this.appliedRevision = mutation.revision;
    switch (mutation.kind) {
      case 'set': {
        const oldValue = this.entries.get(mutation.key);
        this.entries.set(mutation.key, mutation.value);
        return { mutation, oldValue };
      }
      case 'delete': {
        const oldValue = this.entries.get(mutation.key);
        this.entries.delete(mutation.key);
        return { mutation, oldValue };
      }
      case 'clear': {
        const clearedKeys = [...this.entries.keys()];
        this.entries.clear();
        return { mutation, clearedKeys };
      }
    }
  }

  protected emitApplied({ mutation, oldValue, clearedKeys }: AppliedMutation): void {
    const meta = { revision: mutation.revision };
    switch (mutation.kind) {
      case 'set':
        this.emitSafely(`change:${mutation.key}`, mutation.value, oldValue, meta);
        break;
      case 'delete':
        this.emitSafely(`delete:${mutation.key}`, oldValue, meta);
        break;
      case 'clear':
        this.emitSafely('clear', { ...meta, keys: clearedKeys ?? [] });
        break;
    }
    this.emitSafely('mutation', mutation);
  }

  /** Every listener runs even if one throws: a listener bug must not stop this process applying mutations. */
  protected emitSafely(event: string, ...args: unknown[]): void {
    for (const listener of this.rawListeners(event)) {
      try {
        const result = (listener as (...values: unknown[]) => unknown).apply(this, args);
        if (result && typeof (result as Promise<unknown>).then === 'function') {
          (result as Promise<unknown>).then(undefined, (error: unknown) => this.log.error({ err: error, event }, 'storage listener failed'));
        }
      } catch (error) {
        this.log.error({ err: error, event }, 'storage listener failed');
      }
    }
  }

  override on(event: `change:${string}`, listener: ChangeListener): this;
  override on(event: `delete:${string}`, listener: DeleteListener): this;
  override on(event: 'clear', listener: ClearListener): this;
  override on(event: 'mutation', listener: MutationListener): this;
  override on(event: string | symbol, listener: (...args: any[]) => void): this;
  override on(event: string | symbol, listener: (...args: any[]) => void): this {
    return super.on(event, listener);
  }

  override once(event: `change:${string}`, listener: ChangeListener): this;
  override once(event: `delete:${string}`, listener: DeleteListener): this;
  override once(event: 'clear', listener: ClearListener): this;
  override once(event: 'mutation', listener: MutationListener): this;
  override once(event: string | symbol, listener: (...args: any[]) => void): this;
  override once(event: string | symbol, listener: (...args: any[]) => void): this {
    return super.once(event, listener);
  }
}
