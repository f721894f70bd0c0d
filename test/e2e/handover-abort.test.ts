import t from 'tap';
import path from 'node:path';
import { readFileSync, writeFileSync } from 'node:fs';
import { CLI, isAlive } from '../helpers/server-process.js';
import { CliNode, Deployment, boundedLoad, eventually, run } from './handover-fixture.js';

const STARTING = 'hand-over: starting a new primary from the code on disk';
const ABORTED = 'hand-over aborted: this primary keeps serving';
const BOOTED = 'hand-over: the new primary booted; sending it the state, then the sockets';

t.test('a hand-over that fails before the new primary takes over leaves the old one serving, and says why', async (t) => {
  const deployment = new Deployment('0.1.0');
  // The budget the new primary's workers get, and the old primary's own at boot: kept short, the host may be busy.
  const node = await CliNode.start(deployment.cli, { workers: { count: 2, readyTimeoutMs: 40_000 } });
  t.teardown(() => node.stop());
  const oldPid = node.child.pid!;
  await node.readyWorkers(2);
  const load = boundedLoad(node.port);
  const upgrade = () => run(CLI, ['upgrade', '--data-dir', node.dataDir]);
  const abortedSince = async (from: number) => (await node.waitForLog((line) => line.msg === ABORTED, 120_000, from)) as unknown as { successor: number; reason: string };
  const successors: number[] = [];

  await t.test('a new configuration that fails validation: aborted before any socket moves', async (t) => {
    const config = readFileSync(node.configFile, 'utf8');
    writeFileSync(node.configFile, JSON.stringify({ ...JSON.parse(config), wrokers: 2 }));
    t.teardown(() => writeFileSync(node.configFile, config));
    const from = node.lines.length;
    const refused = await upgrade();
    t.equal(refused.status, 1, 'upgrade exits 1');
    t.match(refused.stderr, /hand-over aborted, this primary \(pid \d+\) keeps serving: .*failed: invalid configuration: .*wrokers.*unknown key/, `with the reason: ${refused.stderr}`);
    successors.push((await abortedSince(from)).successor);
    t.equal(node.count((line) => line.msg === BOOTED && node.lines.indexOf(line) >= from), 0, 'the new primary never got the state or a socket');
  });

  await t.test('a new build that throws at boot', async (t) => {
    deployment.patch('dist/cli/start.js', (text) => `throw new Error('this build cannot boot');\n${text}`);
    t.teardown(() => deployment.restore('dist/cli/start.js'));
    const from = node.lines.length;
    const refused = await upgrade();
    t.equal(refused.status, 1);
    t.match(refused.stderr, /failed: Error: this build cannot boot/, `the reason is the new build's error: ${refused.stderr}`);
    successors.push((await abortedSince(from)).successor);
  });

  await t.test('workers that never become ready, asked by SIGUSR2 twice: one hand-over, aborted after workers.readyTimeoutMs', async (t) => {
    deployment.patch('dist/src/boot/worker.js', (text) => text.replace(/export async function bootWorker\(([^)]*)\) \{/, (head) => `${head}\n    await new Promise(() => setInterval(() => {}, 1_000));`));
    t.teardown(() => deployment.restore('dist/src/boot/worker.js'));
    const from = node.lines.length;
    node.signal(oldPid, 'SIGUSR2');
    await node.waitForLog((line) => line.msg === STARTING, 30_000, from);
    node.signal(oldPid, 'SIGUSR2');
    const second = await node.waitForLog((line) => line.msg === 'SIGUSR2: no hand-over', 30_000, from);
    t.match(second.reason, /a hand-over is already running \(asked by SIGUSR2, to pid \d+\)/, 'the second SIGUSR2 is refused while the first runs');
    const meanwhile = await upgrade();
    t.equal(meanwhile.status, 1, 'so is an upgrade');
    t.match(meanwhile.stderr, /a hand-over is already running/);
    const aborted = await abortedSince(from);
    t.match(aborted.reason, /the new primary's workers were not all ready within workers\.readyTimeoutMs \(40000 ms\): 0 of 2 ready/);
    t.equal(node.count((line) => line.msg === STARTING && node.lines.indexOf(line) >= from), 1, 'one hand-over was started');
    successors.push(aborted.successor);
  });

  await t.test('an upgrade while a rolling restart runs is refused', async (t) => {
    // The roll's replacements wait for this file before they boot: the roll is still running when the upgrade
    // is asked, however fast or slow the host is.
    const gate = path.join(node.dataDir, 'replacements-may-boot');
    deployment.patch('dist/src/boot/worker.js', (text) => text.replace(/export async function bootWorker\(([^)]*)\) \{/, (head) => `${head}\n    while (!(await import('node:fs')).existsSync(${JSON.stringify(gate)})) await new Promise((resolve) => setTimeout(resolve, 50));`));
    t.teardown(() => deployment.restore('dist/src/boot/worker.js'));
    const from = node.lines.length;
    node.signal(oldPid, 'SIGHUP');
    await node.waitForLog((line) => line.msg === 'SIGHUP: rolling restart of all workers', 30_000, from);
    const refused = await upgrade();
    t.equal(refused.status, 1);
    t.match(refused.stderr, /a rolling restart is running/);
    writeFileSync(gate, '');
    await eventually(async () => (node.count((line) => line.msg === 'worker ready' && node.lines.indexOf(line) >= from) >= 2 ? true : undefined), 'the roll completes', 150_000);
  });

  const served = await load.stop();
  t.equal(served.failed, 0, `no failed request of ${served.ok}: ${served.errors.slice(0, 5).join('; ')}`);
  t.ok(isAlive(oldPid), 'the old primary still runs');
  t.equal(readFileSync(path.join(node.dataDir, 'primary.pid'), 'utf8').trim(), String(oldPid), 'and the pid file still names it');
  const status = await run(CLI, ['ctl', 'status', '--master', '--json', '--data-dir', node.dataDir]);
  t.equal(JSON.parse(status.stdout).replies[0].result.pid, oldPid, 'its control socket is still its own');
  const groupGone = (pid: number) => {
    try {
      process.kill(-pid, 0);
      return false;
    } catch {
      return true;
    }
  };
  await eventually(async () => (successors.every(groupGone) ? true : undefined), 'every aborted new primary is gone, with the workers it forked');
  t.equal(successors.length, 3);
});
