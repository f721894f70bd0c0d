import t from 'tap';
import path from 'node:path';
import { existsSync, readFileSync, symlinkSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { CLI, tempDir } from '../helpers/server-process.js';
import { CliNode, Deployment, boundedLoad, eventually, run } from './handover-fixture.js';

const INIT = path.resolve(import.meta.dirname, '..', 'fixtures', 'container-init.mjs');
const hasUnshare = (() => {
  try {
    execFileSync('unshare', ['--fork', '--pid', '--mount-proc', 'true'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
})();

t.test('in a container whose init exits with its child (docker run --init), the old primary stays as a stand-in', { skip: hasUnshare ? false : 'needs unshare and root (a PID namespace)' }, async (t) => {
  // PID 1 of a fresh PID namespace named "tini", as `docker run --init` gives a container.
  const bin = tempDir('fleetplane-init-');
  symlinkSync(process.execPath, path.join(bin, 'tini'));
  const deployment = new Deployment('1.0.0-old');
  const node = await CliNode.start(deployment.cli, { workers: { count: 2 } }, ['unshare', '--fork', '--pid', '--mount-proc', path.join(bin, 'tini'), INIT]);
  t.teardown(() => node.stop());
  await node.readyWorkers(2);
  const exited = new Promise<number | null>((resolve) => node.child.once('exit', resolve));

  const load = boundedLoad(node.port, '/healthz', { keepAlive: 2, fresh: 1 });
  deployment.setVersion('1.0.1-new');
  const upgraded = await run(CLI, ['upgrade', '--data-dir', node.dataDir]);
  t.equal(upgraded.status, 0, `upgrade exits 0: ${upgraded.stderr}`);
  await node.waitForLog((line) => line.msg.startsWith('hand-over: staying as a stand-in'), 120_000);
  await eventually(async () => (load.stats.versions.has('1.0.1-new') ? true : undefined), 'the new version answers');
  const status = await run(CLI, ['ctl', 'status', '--master', '--json', '--data-dir', node.dataDir]);
  t.match(JSON.parse(status.stdout).replies[0].result, { version: '1.0.1-new' }, 'the control socket reaches the new primary');
  t.equal(node.child.exitCode, null, 'the container still runs: its init did not see its child exit');
  const served = await load.stop();
  t.equal(served.failed, 0, `no failed request: ${served.errors.slice(0, 5).join('; ')}`);

  // `docker stop`: SIGTERM to the container's init, which passes it to its child, the stand-in.
  const init = Number(readFileSync(`/proc/${node.child.pid}/task/${node.child.pid}/children`, 'utf8').trim().split(/\s+/)[0]);
  process.kill(init, 'SIGTERM');
  t.equal(await exited, 0, 'the stand-in passed the stop on to the new primary and exited 0 once it had stopped gracefully');
  t.notOk(existsSync(path.join(node.dataDir, 'control.sock')), 'the new primary stopped gracefully: its control socket is removed');
  t.notOk(existsSync(path.join(node.dataDir, 'primary.pid')), 'and the pid file');
});
