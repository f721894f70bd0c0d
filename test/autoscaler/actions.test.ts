import path from 'node:path';
import t, { type Test } from 'tap';
import { scaleActions, type ScaleActionDeps } from '../../src/autoscaler/actions.js';
import { EmbeddedStore } from '../../src/db/embedded/store.js';
import { deciderWrites } from '../../src/inventory/decider-writes.js';
import { serverRecords } from '../../src/inventory/records.js';
import type { RequestResult } from '../../src/ipc/handlers.js';
import { tempDir } from '../helpers/server-process.js';

type Reply = RequestResult['replies'][number];

/** The term the actions of these tests were decided in. */
const FENCE = { lease: 'decider:blue', term: 1 };

async function harness(t: Test, options: { managed?: boolean; answer?: (envelope: Record<string, unknown>) => Reply[] } = {}) {
  const db = await EmbeddedStore.open(path.join(tempDir('fleetplane-scale-actions-'), 'store.db'));
  t.teardown(() => db.close());
  const requests: Array<{ envelope: Record<string, unknown>; timeoutMs?: number }> = [];
  const parent: Array<Record<string, unknown>> = [];
  const provider: string[] = [];
  const lines: string[] = [];
  const deps: ScaleActionDeps = {
    cluster: 'blue',
    manager: { managed: options.managed ?? false, send: async (envelope) => void parent.push(envelope) },
    provider: {
      create: async () => {
        provider.push('create');
        return 'new-1';
      },
      terminate: async (serverId) => void provider.push(`terminate ${serverId}`),
    },
    request: async (envelope, timeoutMs) => {
      const given = envelope as Record<string, unknown>;
      requests.push({ envelope: given, ...(timeoutMs === undefined ? {} : { timeoutMs }) });
      return { id: 'r', replies: options.answer?.(given) ?? [], missing: [] };
    },
    records: deciderWrites(db, 'blue'),
    drainTimeoutMs: 42_000,
    log: { info: (_fields, message) => void lines.push(message), warn: (_fields, message) => void lines.push(`warn: ${message}`) },
  };
  return { actions: scaleActions(deps), db, requests, parent, provider, lines };
}

t.test('a drain the node answers waits the drain budget; one nobody answers takes the node back into service', async (t) => {
  const answered = await harness(t, { answer: (envelope) => [{ server: String(envelope.server), worker: 0, ok: true, result: null }] });
  t.equal(await answered.actions.drain('b'), true);
  t.same(answered.requests, [{ envelope: { method: 'drain', server: 'b', master: true, data: { value: true, wait: true } }, timeoutMs: 42_000 }], 'answered once drained, not once accepted');

  const silent = await harness(t);
  t.equal(await silent.actions.drain('b'), false, 'gone or too slow');
  await t.resolveMatch(new Promise((resolve) => setImmediate(() => resolve(silent.requests.map((request) => request.envelope.data)))), [{ value: true, wait: true }, false], 'then undrained');
});

t.test("a node's refusal is an error naming the method, the node and its reason", async (t) => {
  const h = await harness(t, { answer: (envelope) => [{ server: String(envelope.server), worker: 0, ok: false, error: { code: 'bad_request', message: 'not terminating' } }] });
  await t.rejects(h.actions.shutdown('b'), /autoscaler\.remove on b: bad_request: not terminating/);
  t.same(h.requests[0]!.envelope, { method: 'autoscaler.remove', server: 'b', master: true, confirm: 'b' });
});

t.test("an unmanaged cluster asks its provider path; a managed one asks its parent, which also sweeps its copy", async (t) => {
  const unmanaged = await harness(t);
  await unmanaged.actions.scaleOut('cpu', FENCE);
  await unmanaged.actions.terminate('b');
  t.same(unmanaged.provider, ['create', 'terminate b']);
  t.same(unmanaged.parent, []);

  const managed = await harness(t, { managed: true });
  await managed.actions.scaleOut('cpu', FENCE);
  await managed.actions.terminate('b');
  await managed.actions.sweep(FENCE);
  t.same(managed.provider, []);
  t.same(managed.parent, [
    { method: 'createServer', cluster: 'blue' },
    { method: 'terminateServer', cluster: 'blue', server_id: 'b' },
    { method: 'object.delete', collection: 'servers', filter: { cluster_id: 'blue', 'master.status': 'terminating' } },
  ]);
});

t.test("status and sweep touch this cluster's records only", async (t) => {
  const h = await harness(t);
  const servers = serverRecords(h.db);
  await servers.insertOne({ _id: 'b', cluster_id: 'blue', master: { status: 'running' } });
  await servers.insertOne({ _id: 'g', cluster_id: 'green', master: { status: 'running' } });
  await h.actions.setStatus('b', 'terminating', FENCE);
  await h.actions.setStatus('g', 'terminating', FENCE);
  t.equal((await servers.findOne({ _id: 'g' }))?.master?.status, 'running', "another cluster's record is not marked");
  await servers.insertOne({ _id: 'x', cluster_id: 'green', master: { status: 'terminating' } });
  t.equal(await h.actions.sweep(FENCE), 1);
  t.same((await servers.find({})).map((record) => record._id).sort(), ['g', 'x']);
});
