import path from 'node:path';
import t from 'tap';
import { createKey } from '../../src/auth/keys.js';
import { EmbeddedStore } from '../../src/db/embedded/store.js';
import { ServerProcess, request, type Reply } from '../helpers/server-process.js';
import { dataDirWithTenants } from '../helpers/tenants.js';

t.setTimeout(300_000);

interface TargetReply { server: string; worker: number; ok: boolean; result?: any; error?: { code: string; message: string } }

/** Refused by authorization with 403 and an error code, before any process was asked. */
const refused = (reply: Reply) => reply.status === 403 && typeof reply.json().error?.code === 'string';

t.test('the storage envelopes have size, has and clear as server.storage does, over /control, with platform keys only', async (t) => {
  const { dataDir, tenants } = await dataDirWithTenants([
    { name: 'acme', hosts: ['localhost', '127.0.0.1'] },
    { name: 'globex', hosts: ['globex.test'] },
  ]);
  const [acme, globex] = [tenants[0]!, tenants[1]!];
  const store = await EmbeddedStore.open(path.join(dataDir, 'fleetplane.db'));
  const statusOnly = (await createKey(store, { organizationId: acme.organization_id, name: 'status only', permissions: { status: true, 'storage.get': true } })).key;
  const globexStorage = (await createKey(store, { organizationId: globex.organization_id, name: 'storage', permissions: { storage: true } })).key;
  await store.close();
  const server = await ServerProcess.start({ workers: 2, dataDir });
  t.teardown(() => server.stop());
  await server.readyWorkers(2);
  const control = (body: unknown, key?: string, host = 'localhost') => request(server.port, '/control', { body, key, host });
  const replies = async (body: unknown): Promise<TargetReply[]> => {
    const reply = await control(body, acme.adminKey);
    t.equal(reply.status, 200, reply.body);
    return (reply.json().replies as TargetReply[]).sort((a, b) => a.worker - b.worker);
  };

  await control({ method: 'storage.set', master: true, data: { key: 'node_capacity', value: { availableSlots: 45 } } }, acme.adminKey);
  await control({ method: 'storage.set', master: true, data: { key: 'other', value: 1 } }, acme.adminKey);
  t.same(
    (await replies({ method: 'storage.size', master: true, broadcast: true })).map((reply) => [reply.worker, reply.ok, reply.result]),
    [
      [0, true, { size: 2 }],
      [1, true, { size: 2 }],
      [2, true, { size: 2 }],
    ],
    'storage.size: the primary and each worker',
  );
  t.match(await replies({ method: 'storage.has', worker: 1, data: { key: 'node_capacity' } }), [{ worker: 1, ok: true, result: { key: 'node_capacity', has: true } }]);
  t.match(await replies({ method: 'storage.has', worker: 2, data: { key: 'missing' } }), [{ worker: 2, ok: true, result: { key: 'missing', has: false } }]);

  const cases: Array<[string, string | undefined, string]> = [
    ["another organization's admin key, on its own host", globex.adminKey, 'globex.test'],
    ["another organization's admin key, on the platform's host", globex.adminKey, 'localhost'],
    ["another organization's key holding storage", globexStorage, 'globex.test'],
    ['a platform key without the right', statusOnly, 'localhost'],
    ['no key', undefined, 'localhost'],
  ];
  for (const method of ['storage.size', 'storage.has', 'storage.clear']) {
    for (const [name, key, host] of cases) {
      t.ok(refused(await control({ method, master: true, data: { key: 'node_capacity' } }, key, host)), `${method}: ${name} is refused`);
      t.ok(refused(await control({ method, data: { key: 'node_capacity' } }, key, host)), `${method} in the caller's scope: ${name} is refused`);
    }
  }
  t.match(await replies({ method: 'storage.size', master: true }), [{ worker: 0, ok: true, result: { size: 2 } }], 'nothing a refused caller asked for happened');

  t.match(await replies({ method: 'storage.clear', worker: 2 }), [{ worker: 2, ok: true, result: { cleared: true } }], "storage.clear from a worker's replica clears the server's storage");
  t.same(
    (await replies({ method: 'storage.size', master: true, broadcast: true })).map((reply) => reply.result),
    [{ size: 0 }, { size: 0 }, { size: 0 }],
    'every process reflects it',
  );
  t.match(await replies({ method: 'storage.clear', master: true }), [{ worker: 0, ok: true, result: { cleared: false } }], 'already empty: false');
  t.match(await replies({ method: 'storage.has', master: true }), [{ worker: 0, ok: false, error: { code: 'bad_request', message: 'data.key must be a string' } }]);
});
