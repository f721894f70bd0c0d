import t from 'tap';
import path from 'node:path';
import { readFileSync } from 'node:fs';
import { CLI, isAlive, request, tempDir } from '../helpers/server-process.js';
import { CliNode, boundedLoad, eventually, run } from './handover-fixture.js';

// Two worker boots per hand-over on a shared machine: generous budgets, no fixed sleeps.
t.setTimeout(600_000);

interface Reply { server: string; worker: number; ok: boolean; result?: any; error?: { code: string; message: string } }

const ctlJson = async (dataDir: string, args: string[]) => {
  const result = await run(CLI, ['ctl', ...args, '--json', '--data-dir', dataDir]);
  if (result.status !== 0) throw new Error(`ctl ${args.join(' ')}: exit ${result.status}: ${result.stdout}${result.stderr}`);
  return JSON.parse(result.stdout) as { replies: Reply[]; missing: unknown[] };
};

/** The pids of the primary and of each worker, as `ctl status` reports them. */
async function pids(dataDir: string): Promise<{ primary: number; status: string; workers: number[] }> {
  const status = await ctlJson(dataDir, ['status', '--master', '--broadcast', '--timeout', '3000']);
  const primary = status.replies.find((reply) => reply.worker === 0)!;
  const workers = status.replies.filter((reply) => reply.worker > 0).map((reply) => reply.result.pid as number);
  return { primary: primary.result.pid, status: primary.result.status, workers: workers.sort() };
}

t.test('restart with master: true is the hand-over to a new primary on the same port, with no failed request; with broadcast it rolls the workers only', async (t) => {
  const dataDir = tempDir();
  const node = await CliNode.start(CLI, { workers: { count: 2 }, dataDir });
  t.teardown(() => node.stop());
  await node.readyWorkers(2);
  const oldPrimary = node.child.pid!;
  const before = await pids(dataDir);
  t.equal(before.primary, oldPrimary);

  const load = boundedLoad(node.port);
  await eventually(async () => (load.stats.ok > 50 ? true : undefined), 'load running');
  const restart = await ctlJson(dataDir, ['restart', '--master']);
  t.same(restart.missing, [], 'the primary answered');
  t.match(restart.replies, [{ worker: 0, ok: true, result: { accepted: true, restarting: 'primary', handover: { from: { pid: oldPrimary }, to: { pid: Number } } } }], 'accepted: a hand-over to a new primary');
  const successor = restart.replies[0]!.result.handover.to.pid as number;
  t.not(successor, oldPrimary);

  const after = await eventually(async () => {
    const now = await pids(dataDir);
    return now.primary === successor && now.status === 'ready' && now.workers.length === 2 ? now : undefined;
  }, 'the new primary serves', 180_000);
  t.ok(after.workers.every((pid) => !before.workers.includes(pid)), 'with workers of its own');
  await eventually(async () => (isAlive(oldPrimary) ? undefined : true), 'the old primary exits', 120_000);
  t.equal(node.child.exitCode, 0, 'the old primary exits 0');
  const served = await load.stop();
  t.equal(served.failed, 0, `no failed request of ${served.ok + served.failed}: ${served.errors.slice(0, 5).join('; ')}`);
  t.equal((await request(node.port, '/healthz')).status, 200, 'the same port is served');
  t.equal(readFileSync(path.join(dataDir, 'primary.pid'), 'utf8').trim(), String(successor), 'the pid file names the new primary');

  // The workers-only form: the primary stays, each worker is replaced, one at a time.
  const rollingLoad = boundedLoad(node.port, '/healthz', { keepAlive: 2, fresh: 1 });
  const rolling = await ctlJson(dataDir, ['restart', '--broadcast']);
  t.equal(rolling.replies.length, 2, 'both workers answered');
  t.ok(rolling.replies.every((reply) => reply.ok && reply.result.restarting === 'workers'), `each says the workers roll: ${JSON.stringify(rolling.replies)}`);
  const rolled = await eventually(async () => {
    const now = await pids(dataDir);
    return now.status === 'ready' && now.workers.length === 2 && now.workers.every((pid) => !after.workers.includes(pid)) ? now : undefined;
  }, 'both workers replaced', 180_000);
  t.equal(rolled.primary, successor, 'the primary stayed');
  const rollingServed = await rollingLoad.stop();
  t.equal(rollingServed.failed, 0, `no failed request during the rolling restart: ${rollingServed.errors.slice(0, 5).join('; ')}`);
});
