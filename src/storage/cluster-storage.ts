import { SafeEmitter } from '../events/safe-emitter.js';
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

/** SPEC 4.1: the events of storage and the arguments their listeners receive. */
export interface StorageEvents {
  [event: `change:${string}`]: [newValue: JsonValue, oldValue: JsonValue | undefined, meta: StorageEventMeta];
  [event: `delete:${string}`]: [oldValue: JsonValue, meta: StorageEventMeta];
  clear: [meta: StorageClearMeta];
  mutation: [mutation: StorageMutation];
}

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
export abstract class ClusterStorage extends SafeEmitter<StorageEvents> {
  protected readonly entries = new Map<string, JsonValue>();
  protected appliedRevision = 0;

  /** Every listener runs even if one throws: a listener bug must not stop this process applying mutations. */
  constructor(protected readonly log: StorageLog) {
    super((event, error) => log.error({ err: error, event }, 'storage listener failed'));
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
        this.emitSafe(`change:${mutation.key}`, mutation.value, oldValue, meta);
        break;
      case 'delete':
        // A delete is only applied to a key that exists.
        this.emitSafe(`delete:${mutation.key}`, oldValue!, meta);
        break;
      case 'clear':
        this.emitSafe('clear', { ...meta, keys: clearedKeys ?? [] });
        break;
    }
    this.emitSafe('mutation', mutation);
  }
}
