import { Type, type Static } from '@sinclair/typebox';
import { lazyCheck } from '../schema/lazy-check.js';
import { IpcError } from '../ipc/envelope.js';
import type { IpcHandler } from '../ipc/handlers.js';
import { StorageError } from './errors.js';
import type { ClusterStorage } from './cluster-storage.js';
import type { JsonValue } from './json-value.js';

/** The `data` of the storage envelopes that name a key. The key's own rules (length, form) are the storage's. */
export const StorageKeyData = Type.Object({ key: Type.String({ description: 'The key (1 to 256 characters)' }) }, { $id: 'StorageKeyData' });
/** `storage.set`'s `data`: the key and its JSON value. */
export const StorageSetData = Type.Object(
  { key: Type.String({ description: 'The key (1 to 256 characters)' }), value: Type.Unknown({ description: 'Any JSON value up to 256 KiB serialized' }) },
  { $id: 'StorageSetData' },
);

const keyCheck = lazyCheck(StorageKeyData);
const setCheck = lazyCheck(StorageSetData);

function keyOf(data: unknown): string {
  if (!keyCheck.Check(data)) throw new IpcError('bad_request', 'data.key must be a string', 'data.key');
  return data.key;
}

function setOf(data: unknown): Static<typeof StorageSetData> {
  if (!setCheck.Check(data)) throw new IpcError('bad_request', 'data must be { "key": string, "value": JSON }', 'data');
  return data;
}

/** A storage refusal (a key too long, a value that is not JSON) is the caller's mistake: 400 naming `data`. */
async function storageCall<T>(run: () => Promise<T>): Promise<T> {
  try {
    return await run();
  } catch (error) {
    if (error instanceof StorageError) throw new IpcError('bad_request', error.message, 'data');
    throw error;
  }
}

/** The storage API's calls as control methods (SPEC 4.1), `storage.<call>`. */
export const STORAGE_ENVELOPE_METHODS = ['storage.get', 'storage.has', 'storage.set', 'storage.delete', 'storage.keys', 'storage.size', 'storage.clear'] as const;
export type StorageEnvelopeMethod = (typeof STORAGE_ENVELOPE_METHODS)[number];

/**
 * Registers this process's `storage.*` methods, answered from its replica (the authority in the primary): `get`
 * `{ key, value }` (null when missing), `has` `{ key, has }`, `set` `{ revision }`, `delete` `{ deleted }`, `keys`
 * `{ keys }`, `size` `{ size }`, `clear` `{ cleared }` (false: already empty). They act on the server itself:
 * platform keys only (src/auth/authority.ts), and never from a workflow step.
 */
export function registerStorageEnvelopes(handle: (method: StorageEnvelopeMethod, handler: IpcHandler) => void, storage: ClusterStorage): void {
  handle('storage.get', (data) => storageCall(async () => ({ key: keyOf(data), value: (await storage.get(keyOf(data))) ?? null })));
  handle('storage.has', (data) => storageCall(async () => ({ key: keyOf(data), has: await storage.has(keyOf(data)) })));
  handle('storage.set', (data) => {
    const { key, value } = setOf(data);
    return storageCall(async () => ({ revision: await storage.set(key, value as JsonValue) }));
  });
  handle('storage.delete', (data) => storageCall(async () => ({ deleted: await storage.delete(keyOf(data)) })));
  handle('storage.keys', async () => ({ keys: await storage.keys() }));
  handle('storage.size', async () => ({ size: await storage.size() }));
  handle('storage.clear', async () => ({ cleared: await storage.clear() }));
}
