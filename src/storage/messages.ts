import type { JsonValue } from './json-value.js';

/**
 * The storage's methods in the primary ⇄ worker protocol (`src/runtime/protocol.ts` declares and checks their
 * parameters): a worker writes and, after a revision gap, asks for a snapshot; the primary pushes the snapshot
 * and then every mutation, in revision order, on the same ordered channel.
 */
export const STORAGE_METHODS = {
  write: 'primary.storage.write',
  sync: 'primary.storage.sync',
  snapshot: 'worker.storage.snapshot',
  mutation: 'worker.storage.mutation',
} as const;

/** A worker's write, as `primary.storage.write` takes it. */
export type StorageWrite = { op: 'set'; key: string; value: JsonValue } | { op: 'delete'; key: string } | { op: 'clear' };

/** The answer to a write: the result, and the revision the writer's replica reaches before the write resolves. */
export interface WriteAnswer {
  revision: number;
  result: number | boolean;
}

/** One applied change, numbered by the primary; every process applies them in revision order. */
export type StorageMutation =
  | { kind: 'set'; revision: number; key: string; value: JsonValue }
  | { kind: 'delete'; revision: number; key: string }
  | { kind: 'clear'; revision: number };

/** The entries as of one revision: what a worker starts from, and resyncs from. */
export interface StorageSnapshot {
  revision: number;
  entries: Array<[string, JsonValue]>;
}
