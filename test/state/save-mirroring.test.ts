import t, { type Test } from 'tap';
import { loadConfig } from '../../src/config/load.js';
import type { Logger } from '../../src/logging/logger.js';
import type { PrimaryRuntime } from '../../src/runtime/primary.js';
import type { WorkerRuntime } from '../../src/runtime/worker.js';
import { ServerState } from '../../src/state/state.js';
import { testStore } from '../auth/fixtures/tenants.js';

async function setup(t: Test, role: 'primary' | 'worker') {
  const store = await testStore();
  t.teardown(() => store.close());
  const config = loadConfig({ env: {}, object: { server: { cluster: 'c1' } } }).config;
  const mirrored: Array<{ serverId: string; clusterId: string; section: string; fields: Record<string, unknown> }> = [];
  const manager = { mirrorSave: (serverId: string, clusterId: string, section: string, fields: Record<string, unknown>) => void mirrored.push({ serverId, clusterId, section, fields }) };
  const runtime = role === 'primary' ? { primaryRuntime: { status: 'ready' } as unknown as PrimaryRuntime } : { workerRuntime: { workerId: 2, status: 'ready', rpc: { handle: () => undefined }, beforeReady: () => undefined } as unknown as WorkerRuntime };
  const state = new ServerState({ id: 's1', config, log: {} as Logger, status: 'ready', db: store, manager, ...runtime });
  return { store, state, mirrored };
}

t.test("a primary's successful save is mirrored once, with the section it wrote", async (t) => {
  const { state, mirrored } = await setup(t, 'primary');
  t.same(await state.save(), { saved: true });
  t.equal(mirrored.length, 1);
  t.match(mirrored[0], { serverId: 's1', clusterId: 'c1', section: 'master', fields: { status: 'running', pid: process.pid } });
});

t.test("a worker's save is mirrored under its own section", async (t) => {
  const { state, mirrored } = await setup(t, 'worker');
  await state.save();
  t.equal(mirrored.length, 1);
  t.equal(mirrored[0]!.section, 'workers.2');
  t.equal(mirrored[0]!.fields.status, 'ready');
});

t.test('a save skipped because the record is terminating or failed is not mirrored', async (t) => {
  const { store, state, mirrored } = await setup(t, 'primary');
  await store.collection('servers').insertOne({ _id: 's1', master: { status: 'terminating' } });
  t.same(await state.save(), { saved: false, skipped: 'the record is terminating' });
  t.equal(mirrored.length, 0);
});
