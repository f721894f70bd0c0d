import t from 'tap';
import { isAlive, request, type ServerProcess } from '../helpers/server-process.js';
import { spawnPluginServer, started } from './plugin-process.js';

const names = (server: ServerProcess, event: string) => server.events.filter((candidate) => candidate.event === event).map((candidate) => candidate.name);

t.test('plugins install in order before any worker is forked; a plugin patches the worker env and overrides the worker count, and every forked worker sees both', async (t) => {
  const server = spawnPluginServer(t, { workers: 1 }, [
    { name: 'recorder', record: true },
    { name: 'sizer', env: { PLUGIN_MARK: 'sized' }, workers: 3, child: { name: 'sizer-child', env: { PLUGIN_OTHER: 'from-child' } } },
  ]);
  const start = await started(server);
  t.equal(start.workerCount, 3, 'server.workerCount is the overridden count');
  t.same(names(server, 'plugin:install'), ['recorder', 'sizer', 'sizer-child'], 'registration order; a plugin registered by an install is installed after it');
  for (const install of server.events.filter((event) => event.event === 'plugin:install')) {
    t.equal(install.workersForked, 0, `${install.name} installed before any worker was forked`);
    t.equal(install.configuredWorkers, 1, `${install.name} received the resolved config`);
    t.equal(install.hasLog, true, `${install.name} received a logger`);
  }

  const ready = await server.readyWorkers(3);
  const lastInstall = server.events.findLastIndex((event) => event.event === 'plugin:install');
  const firstOnline = server.events.findIndex((event) => event.event === 'worker:online');
  t.ok(firstOnline > lastInstall, 'the first worker came online after the last install');
  t.same(ready.map((event) => event.workerId).sort(), [1, 2, 3], 'three workers although the config says one');
  const fleet = await server.command<{ target: number; active: number }>('fleet');
  t.match(fleet, { target: 3, active: 3 }, 'the fleet targets three workers');

  // Fresh connections go round-robin over the ready workers: six requests reach all three.
  const seen = new Map<number, { pid: number; mark: string; other: string; workerCount: number; totalWorkers: number }>();
  for (let i = 0; i < 6; i++) {
    const reply = (await request(server.port, '/fixture/env')).json();
    seen.set(reply.worker, reply);
  }
  t.same([...seen.keys()].sort(), [1, 2, 3], 'all three workers answered');
  for (const [worker, reply] of seen) {
    t.same(reply, { worker, pid: reply.pid, workerCount: 3, totalWorkers: 3, mark: 'sized', other: 'from-child' }, `worker ${worker} sees both patches and the count`);
  }
});

t.test('once the workers are forked, use(), patchWorkerEnv() and overrideWorkerCount() throw, in the primary and in a worker', async (t) => {
  const server = spawnPluginServer(t, { workers: 1 }, [{ name: 'recorder', record: true }]);
  await started(server);
  await server.readyWorkers(1);
  const primary = await server.command<Record<string, string | null>>('late');
  t.match(primary.use, /use\(\): the workers were already forked/, 'primary: use() throws');
  t.match(primary.patchWorkerEnv, /patchWorkerEnv\(\): the workers were already forked/, 'primary: patchWorkerEnv() throws');
  t.match(primary.overrideWorkerCount, /overrideWorkerCount\(\): the workers were already forked/, 'primary: overrideWorkerCount() throws');
  const worker = (await request(server.port, '/fixture/late', { body: {} })).json();
  t.match(worker.use, /use\(\): plugins are installed in the primary only/, 'worker: use() throws');
  t.match(worker.patchWorkerEnv, /patchWorkerEnv\(\): only the primary forks workers/, 'worker: patchWorkerEnv() throws');
  t.match(worker.overrideWorkerCount, /overrideWorkerCount\(\): only the primary forks workers/, 'worker: overrideWorkerCount() throws');
  t.match(await server.command('fleet'), { target: 1, active: 1 }, 'nothing changed');
});

t.test('a plugin whose install fails stops the start with a one-line error naming it; plugins installed before it are uninstalled; no worker is forked', async (t) => {
  const server = spawnPluginServer(t, { workers: 2 }, [
    { name: 'recorder', record: true },
    { name: 'licence-check', fail: 'no licence found\nsecond line' },
    { name: 'never' },
  ]);
  const code = await server.exit();
  t.not(code, 0, 'the process failed');
  t.same(names(server, 'plugin:install'), ['recorder', 'licence-check'], 'the next plugin is not installed');
  t.same(names(server, 'plugin:uninstall'), ['recorder'], 'the plugin installed before it is uninstalled');
  t.equal(server.count((event) => event.event === 'started'), 0, 'init rejected');
  const stderr = server.stderr.join('\n');
  t.match(stderr, /plugin "licence-check" failed to install: no licence found/, 'the error names the plugin and the reason');
  t.notMatch(stderr, /failed to install: no licence found\nsecond line/, 'the message is one line');
  t.equal(server.count((event) => event.event === 'worker:online'), 0, 'no worker came online');
});

t.test('SIGTERM uninstalls plugins in reverse order after the workers are gone; a failing uninstall is logged and the others still run; exit 0', async (t) => {
  const server = spawnPluginServer(t, { workers: 2, log: { level: 'error' } }, [
    { name: 'recorder', record: true },
    { name: 'flaky', uninstallFails: true },
    { name: 'last' },
  ]);
  await started(server);
  const ready = await server.readyWorkers(2);
  server.signal('SIGTERM');
  t.equal(await server.exit(), 0, 'graceful exit');
  t.same(names(server, 'plugin:uninstall'), ['last', 'flaky', 'recorder'], 'reverse order of installation, the failure did not stop the others');
  const firstUninstall = server.events.findIndex((event) => event.event === 'plugin:uninstall');
  const lastExit = server.events.findLastIndex((event) => event.event === 'worker:exit');
  const complete = server.events.findIndex((event) => event.event === 'shutdown:complete');
  t.ok(lastExit >= 0 && lastExit < firstUninstall, 'uninstall runs once every worker has exited');
  t.ok(complete > firstUninstall, 'shutdown:complete comes after the uninstalls');
  t.ok(server.events.some((event) => event.msg === 'plugin uninstall failed' && event.plugin === 'flaky'), 'the failing uninstall is logged, naming the plugin');
  for (const event of ready) t.notOk(isAlive(event.pid as number), `worker ${event.pid} is gone`);
});

t.test('overrideWorkerCount refuses 0, more than 256 and fractions; patchWorkerEnv refuses __proto__, constructor, prototype and non-string values; the fleet is unchanged', async (t) => {
  const server = spawnPluginServer(t, { workers: 1 }, [{ name: 'recorder', record: true }, { name: 'prober', probe: true }]);
  await started(server);
  const probe = await server.waitFor((event) => event.event === 'plugin:probe');
  t.match(probe.zero, /must be an integer from 1 to 256 \(single-process mode, 0, is chosen by config.workers only\)/);
  t.match(probe.tooMany, /overrideWorkerCount\(257\): the worker count must be an integer from 1 to 256/);
  t.match(probe.fraction, /overrideWorkerCount\(1.5\)/);
  t.match(probe.proto, /patchWorkerEnv.__proto__: environment key "__proto__" is refused/);
  t.match(probe.constructorKey, /patchWorkerEnv.constructor: environment key "constructor" is refused/);
  t.match(probe.prototypeKey, /patchWorkerEnv.prototype: environment key "prototype" is refused/);
  t.match(probe.notString, /patchWorkerEnv.N: environment values must be strings/);
  await server.readyWorkers(1);
  t.match(await server.command('fleet'), { target: 1, active: 1 }, 'still the configured single worker');
});

t.test('single-process mode: the env patch of a plugin reaches the in-process app; overriding the worker count fails the start, naming the plugin', async (t) => {
  const single = spawnPluginServer(t, { workers: 0 }, [{ name: 'env', env: { PLUGIN_MARK: 'in-process' } }]);
  const start = await started(single);
  t.equal(start.workerCount, 0);
  t.match((await request(single.port, '/fixture/env')).json(), { worker: 0, workerCount: 0, mark: 'in-process' }, 'the app in the primary sees the patch');

  const sized = spawnPluginServer(t, { workers: 0 }, [{ name: 'sizer', workers: 2 }]);
  t.not(await sized.exit(), 0, 'the start failed');
  t.match(sized.stderr.join('\n'), /plugin "sizer" failed to install: overrideWorkerCount\(\): this server runs in single-process mode \(workers: 0\)/);
});
