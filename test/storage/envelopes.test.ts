import t from 'tap';
import { HandlerRegistry } from '../../src/ipc/handlers.js';
import type { DeliveredEnvelope } from '../../src/ipc/envelope.js';
import { StorageAuthority } from '../../src/storage/authority.js';
import { STORAGE_ENVELOPE_METHODS, registerStorageEnvelopes } from '../../src/storage/envelopes.js';
import { isServerMethod } from '../../src/auth/authority.js';
import { RecordingLog } from './fake-cluster.js';

/** The primary's storage with no worker connected, and its storage.* methods. */
function primary() {
  const storage = new StorageAuthority({ notify: () => true, onConnect: () => undefined, onDisconnect: () => undefined }, () => undefined, new RecordingLog());
  const handlers = new HandlerRegistry();
  registerStorageEnvelopes((method, handler) => handlers.handle(method, handler), storage);
  const call = (method: string, data?: unknown) => handlers.run({ method, master: true, data, meta: { id: 'm', origin: { server: 's', worker: 0 }, hops: 0 } } as DeliveredEnvelope);
  return { storage, call };
}

t.test('storage.size, storage.has and storage.clear answer as server.storage does', async (t) => {
  const { storage, call } = primary();
  t.same(await call('storage.size'), { ok: true, result: { size: 0 } });
  t.same(await call('storage.clear'), { ok: true, result: { cleared: false } }, 'clearing an empty storage: false, as storage.clear() resolves');
  await call('storage.set', { key: 'node_capacity', value: { availableSlots: 45 } });
  await storage.set('other', 1);
  t.same(await call('storage.size'), { ok: true, result: { size: 2 } });
  t.same(await call('storage.has', { key: 'node_capacity' }), { ok: true, result: { key: 'node_capacity', has: true } });
  t.same(await call('storage.has', { key: 'missing' }), { ok: true, result: { key: 'missing', has: false } });
  t.same(await call('storage.clear'), { ok: true, result: { cleared: true } });
  t.equal(await storage.size(), 0, 'the storage is empty');
  t.same(await call('storage.keys'), { ok: true, result: { keys: [] } });
});

t.test("a storage envelope's data is checked where it arrives: 400 naming the field, nothing changed", async (t) => {
  const { storage, call } = primary();
  await storage.set('kept', 1);
  for (const [method, data] of [['storage.has', undefined], ['storage.has', { key: 7 }], ['storage.get', 'kept'], ['storage.delete', {}]] as const) {
    t.match(await call(method, data), { ok: false, error: { code: 'bad_request', message: 'data.key must be a string' } }, `${method} ${JSON.stringify(data)}`);
  }
  t.match(await call('storage.set', { value: 1 }), { ok: false, error: { code: 'bad_request' } });
  t.match(await call('storage.has', { key: 'k'.repeat(257) }), { ok: false, error: { code: 'bad_request', message: /257 characters/ } }, "the storage's own key rule");
  t.same(await storage.keys(), ['kept']);
});

t.test('every storage envelope acts on the server itself: platform keys only', async (t) => {
  t.same([...STORAGE_ENVELOPE_METHODS].sort(), ['storage.clear', 'storage.delete', 'storage.get', 'storage.has', 'storage.keys', 'storage.set', 'storage.size']);
  for (const method of STORAGE_ENVELOPE_METHODS) t.ok(isServerMethod(method), method);
});
