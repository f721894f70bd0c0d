import t from 'tap';
import { statSync, existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { ServerProcess, fleetplane, request, tempDir } from '../helpers/server-process.js';

const ctl = (args: string[]) => fleetplane(['ctl', ...args]);

t.test('fleetplane ctl steers a running server through its 0600 control socket', async (t) => {
  const dataDir = tempDir();
  const server = await ServerProcess.start({ workers: 2, dataDir, fallback: { redirect: 'http://lb.example.test' } });
  t.teardown(() => server.stop());
  await server.readyWorkers(2);
  const socket = path.join(dataDir, 'control.sock');
  t.equal(statSync(socket).mode & 0o777, 0o600, 'socket is mode 0600');

  const status = await ctl(['status', '--broadcast', '--master', '--json', '--data-dir', dataDir]);
  t.equal(status.status, 0, status.stderr);
  const result = JSON.parse(status.stdout);
  t.equal(result.replies.length, 3);
  t.same(result.missing, []);
  const people = await ctl(['status', '--broadcast', '--master', '--data-dir', dataDir]);
  t.equal(people.status, 0, people.stderr);
  const [head, ...processes] = people.stdout.trimEnd().split('\n');
  t.match(head, /^SERVER +PROCESS +PID +STATE +VERSION +STARTED +UPTIME +CONNECTIONS +RSS$/, 'without --json: a table for people');
  t.same(processes.map((row) => row.split(/ {2,}/)[1]).sort(), ['primary', 'worker 1', 'worker 2'], 'a row per process');
  t.ok(processes.every((row) => / \d+ s +\d+ +\d+ MiB$/.test(row)), 'uptime in seconds, memory in MiB');

  const cordon = await ctl(['cordon', '--broadcast', '--value', 'true', '--data-dir', dataDir]);
  t.equal(cordon.status, 0, cordon.stderr);
  t.match(cordon.stdout, /worker 1: worker=1 status=cordoned$/m, 'a line per process, its result as key=value');
  t.equal((await request(server.port, '/x')).status, 307, 'every worker cordoned: fallback');

  const uncordon = await ctl(['cordon', '--master', '--value', 'false', '--data-dir', dataDir]);
  t.equal(uncordon.status, 0, uncordon.stderr);
  t.equal((await request(server.port, '/whoami')).status, 200, 'uncordoned through the primary');

  const table = await fleetplane(['status', '--data-dir', dataDir]);
  t.equal(table.status, 0, table.stderr);
  const [header, ...rows] = table.stdout.trimEnd().split('\n');
  t.match(header, /^SERVER +PROCESS +PID +STATE +VERSION +STARTED +UPTIME +CONNECTIONS +RSS$/, 'fleetplane status: a table with a header');
  t.match(rows.find((row) => row.includes('primary')), / \d+\.\d+\.\d+\S* +\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ /, "the primary's version and start time");
  t.same(rows.map((row) => row.split(/ {2,}/)[1]).sort(), ['primary', 'worker 1', 'worker 2'], 'a row per process');
  t.ok(rows.every((row) => / \d+ MiB$/.test(row) && / (ready|running|degraded) /.test(row)), 'with its state and memory');

  const absent = await ctl(['status', '--worker', '7', '--json', '--data-dir', dataDir]);
  t.equal(absent.status, 1, 'a worker that does not exist is missing, and ctl exits 1');
  t.same(JSON.parse(absent.stdout).missing, [{ server: server.events[0]!.id, worker: 7 }]);
  t.same(JSON.parse(absent.stdout).unknownWorkers, [{ server: server.events[0]!.id, worker: 7, message: 'no such worker: 7 (this server has workers 1, 2)' }], 'and why');
  const noSuchWorker = await ctl(['status', '--worker', '7', '--data-dir', dataDir]);
  t.equal(noSuchWorker.status, 1);
  t.equal(noSuchWorker.stdout, `${server.events[0]!.id}: no such worker: 7 (this server has workers 1, 2)\n`, 'said so, not "no answer"');

  server.signal('SIGTERM');
  t.equal(await server.exit(), 0);
  t.notOk(existsSync(socket), 'the socket is removed on shutdown');
});

t.test('fleetplane ctl: bad input is one line and exit 2; no server is exit 1', async (t) => {
  const dataDir = tempDir();
  const noTarget = await ctl(['status', '--data-dir', dataDir]);
  t.equal(noTarget.status, 2);
  t.match(noTarget.stderr, /names no target/);
  const badValue = await ctl(['cordon', '--master', '--value', '{nope', '--data-dir', dataDir]);
  t.equal(badValue.status, 2);
  t.match(badValue.stderr, /--value is not JSON/);
  const badWorker = await ctl(['status', '--worker', 'two', '--data-dir', dataDir]);
  t.equal(badWorker.status, 2);
  const noServer = await ctl(['status', '--master', '--data-dir', dataDir]);
  t.equal(noServer.status, 1);
  t.match(noServer.stderr, /no server is running with this data directory/);
  t.equal(noServer.stderr.trim().split('\n').length, 1);
});

t.test('reboot: refused without hostControl or without confirm; with both the node drains and stops first, then runs the configured command', async (t) => {
  const dataDir = tempDir();
  const marker = path.join(dataDir, 'rebooted');
  const pidFile = path.join(dataDir, 'worker.pid');
  // The command records whether the worker was still running when it ran.
  const script = `const fs = require('node:fs'); let alive = true; try { process.kill(Number(fs.readFileSync(${JSON.stringify(pidFile)}, 'utf8')), 0); } catch { alive = false; } fs.writeFileSync(${JSON.stringify(marker)}, alive ? 'worker alive' : 'worker gone');`;
  const server = await ServerProcess.start({ workers: 1, dataDir, lifecycle: { hostControl: true, rebootCommand: [process.execPath, '-e', script] } });
  t.teardown(() => server.stop());
  const [ready] = await server.readyWorkers(1);
  writeFileSync(pidFile, String(ready!.pid));
  const id = server.events[0]!.id as string;
  const unconfirmed = await ctl(['reboot', '--master', '--json', '--data-dir', dataDir]);
  t.equal(unconfirmed.status, 1);
  t.match(JSON.parse(unconfirmed.stdout).replies[0].error, { code: 'bad_request', message: /confirm must be this server's id/ });
  t.notOk(existsSync(marker));
  const confirmed = await ctl(['reboot', '--master', '--confirm', id, '--json', '--data-dir', dataDir]);
  t.equal(confirmed.status, 0, confirmed.stderr);
  t.same(JSON.parse(confirmed.stdout).replies[0].result, { command: 'reboot', accepted: true });
  t.equal(await server.exit(), 0, 'the node stopped and the command succeeded');
  t.equal(readFileSync(marker, 'utf8'), 'worker gone', 'the configured command ran after the workers had stopped');
  t.ok(server.events.some((event) => event.event === 'shutdown:complete' && event.signal === 'reboot'), 'a graceful stop came first');

  const locked = await ServerProcess.start({ workers: 1 });
  t.teardown(() => locked.stop());
  const reply = await locked.command<{ replies: Array<{ error: { code: string } }> }>('request', { envelope: { method: 'reboot', master: true, confirm: locked.events[0]!.id } });
  t.equal(reply.replies[0]!.error.code, 'forbidden', 'hostControl off → forbidden');
});
