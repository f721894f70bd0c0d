import t from 'tap';
import { noSuchWorker, resolveTargets, type TargetView } from '../../src/ipc/targets.js';
import { IpcError, parseEnvelope, type IpcEnvelope } from '../../src/ipc/envelope.js';

const view: TargetView = {
  serverId: 'a',
  cluster: 'east',
  workers: [1, 2, 3],
  serves: (workerId, organizationId) => ({ 1: ['org-1'], 2: ['org-2'], 3: ['org-1', 'org-2'] })[workerId as 1 | 2 | 3].includes(organizationId),
};

const plan = (envelope: Omit<IpcEnvelope, 'method'>, fromPeer = false) => resolveTargets({ method: 'm', ...envelope }, view, fromPeer);

t.test('targeting matrix', async (t) => {
  const rows: Array<[string, Omit<IpcEnvelope, 'method'>, ReturnType<typeof plan>]> = [
    ['one worker', { worker: 2 }, { master: false, workers: [2], forward: undefined }],
    ['several workers', { worker: [3, 1] }, { master: false, workers: [1, 3], forward: undefined }],
    ['duplicate worker numbers are delivered once', { worker: [2, 2] }, { master: false, workers: [2], forward: undefined }],
    ['unknown worker numbers are not targets: they are reported absent, and unknown', { worker: [9, 2, 7] }, { master: false, workers: [2], forward: undefined, absent: [7, 9], unknown: [7, 9] }],
    ['broadcast: every worker here, and every peer', { broadcast: true }, { master: false, workers: [1, 2, 3], forward: { all: true, organization_id: undefined } }],
    ['master: the primary only', { master: true }, { master: true, workers: [], forward: undefined }],
    ['master and broadcast', { master: true, broadcast: true }, { master: true, workers: [1, 2, 3], forward: { all: true, organization_id: undefined } }],
    ['organization scope: only workers serving it, and peers serving it', { organization_id: 'org-1' }, { master: false, workers: [1, 3], forward: { all: true, organization_id: 'org-1' } }],
    ['organization scope with broadcast stays a scope', { organization_id: 'org-2', broadcast: true }, { master: false, workers: [2, 3], forward: { all: true, organization_id: 'org-2' } }],
    ['explicit worker wins over broadcast', { worker: 1, broadcast: true }, { master: false, workers: [1], forward: { all: true, organization_id: undefined } }],
    ['this server by id addresses its primary', { server: 'a' }, { master: true, workers: [], forward: undefined }],
    ['this server and one worker', { server: 'a', worker: 3 }, { master: false, workers: [3], forward: undefined }],
    ['another server only: forwarded, nothing here', { server: 'b', worker: 1 }, { master: false, workers: [], forward: { servers: ['b'] } }],
    ['this and another server', { server: ['a', 'b'], broadcast: true }, { master: false, workers: [1, 2, 3], forward: { servers: ['b'] } }],
    ['cluster of this server', { cluster: 'east', master: true }, { master: true, workers: [], forward: { clusters: ['east'] } }],
    ['another cluster', { cluster: 'west', broadcast: true }, { master: false, workers: [], forward: { clusters: ['west'] } }],
    ['from a peer: delivered here, never forwarded again', { broadcast: true }, { master: false, workers: [1, 2, 3], forward: undefined }],
  ];
  for (const [name, envelope, expected] of rows) {
    t.same(plan(envelope, name.startsWith('from a peer')), expected, name);
  }
});

t.test('a worker the server has but that takes no envelope now is absent; one it does not have is also unknown, and said so', async (t) => {
  // Worker 2 is restarting: it exists, it does not answer now.
  const restarting: TargetView = { ...view, workers: [1, 3], existing: [1, 2, 3] };
  t.same(resolveTargets({ method: 'm', worker: [2, 9] }, restarting), { master: false, workers: [], forward: undefined, absent: [2, 9], unknown: [9] });
  t.equal(noSuchWorker(9, restarting), 'no such worker: 9 (this server has workers 1, 2, 3)');
  t.equal(noSuchWorker(4, { ...view, workers: [1], existing: [1] }), 'no such worker: 4 (this server has worker 1)');
  const single: TargetView = { serverId: 'a', cluster: 'c', singleProcess: true, workers: [0], serves: () => false };
  t.same(resolveTargets({ method: 'm', worker: [0, 3] }, single), { master: false, workers: [0], forward: undefined, absent: [3], unknown: [3] });
  t.equal(noSuchWorker(3, single), 'no such worker: 3 (this server runs in a single process: worker 0)');
});

t.test('no target is an error', async (t) => {
  t.throws(() => plan({}), { code: 'no_target' });
  t.throws(() => plan({ master: false, broadcast: false }), { code: 'no_target' });
});

t.test('shed acts on the whole server: a worker target is refused, its server-wide targets are routed', async (t) => {
  const refusal = { code: 'invalid_target', statusCode: 400, field: 'worker', message: 'shed applies to the whole server: use master: true or server: <id>, not worker' };
  for (const envelope of [{ worker: 2 }, { worker: [1, 2] }, { server: 'b', worker: 2 }, { master: true, worker: 1 }, { worker: 1, broadcast: true }]) {
    t.throws(() => resolveTargets({ method: 'shed', ...envelope }, view), refusal, JSON.stringify(envelope));
    t.throws(() => resolveTargets({ method: 'shed', ...envelope }, view, true), refusal, `${JSON.stringify(envelope)} from a peer`);
  }
  t.same(resolveTargets({ method: 'shed', master: true }, view), { master: true, workers: [], forward: undefined });
  t.same(resolveTargets({ method: 'shed', server: 'b' }, view), { master: false, workers: [], forward: { servers: ['b'] } });
  t.same(resolveTargets({ method: 'shed', broadcast: true }, view), { master: false, workers: [1, 2, 3], forward: { all: true, organization_id: undefined } }, 'every worker of every server: every server');
  t.same(resolveTargets({ method: 'status', worker: 2 }, view), { master: false, workers: [2], forward: undefined }, 'other methods take worker targets');
});

t.test('single process: primary and worker 0 are one target', async (t) => {
  const single: TargetView = { serverId: 'a', cluster: 'c', singleProcess: true, workers: [0], serves: () => false };
  t.same(resolveTargets({ method: 'm', master: true, broadcast: true }, single), { master: true, workers: [], forward: { all: true, organization_id: undefined } });
  t.same(resolveTargets({ method: 'm', worker: 0 }, single), { master: false, workers: [0], forward: undefined });
});

t.test('envelope validation names the field', async (t) => {
  const reject = (input: unknown) => {
    try {
      parseEnvelope(input, 4096);
    } catch (error) {
      if (error instanceof IpcError) return error;
    }
    throw new Error('expected an IpcError');
  };
  t.match(reject({ method: 'status', wroker: 1 }), { code: 'invalid_envelope', field: 'wroker', message: /unknown field/ });
  t.match(reject({ method: 'status', worker: 'one' }), { field: 'worker', message: /worker number/ });
  t.match(reject({ method: 'status', worker: -1 }), { field: 'worker' });
  t.match(reject({ method: 'status', worker: Array.from({ length: 257 }, (_, i) => i % 200) }), { field: 'worker' });
  t.match(reject({ method: 'status', server: [] }), { field: 'server' });
  t.match(reject({ worker: 1 }), { field: 'method' });
  t.match(reject({ method: 'has space', master: true }), { field: 'method' });
  t.match(reject({ method: 'status', master: true, data: 'x'.repeat(5000) }), { code: 'too_large', statusCode: 413 });
  t.match(reject(null), { code: 'invalid_envelope' });
  t.equal(parseEnvelope({ method: 'status', master: true }).method, 'status');
});
