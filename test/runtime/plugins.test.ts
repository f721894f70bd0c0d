import t from 'tap';
import { createLogger } from '../../src/logging/logger.js';
import type { ResolvedConfig } from '../../src/config/schema.js';
import { PluginHost, type Plugin } from '../../src/runtime/plugins.js';

interface FakeServer {
  calls: string[];
}

const config = { workers: { count: 2 } } as unknown as ResolvedConfig;

function harness() {
  const lines: Array<Record<string, unknown>> = [];
  const log = createLogger({ level: 'info', destination: { write: (line: string) => void lines.push(JSON.parse(line)) } });
  const server: FakeServer = { calls: [] };
  const host = new PluginHost<FakeServer>();
  return { lines, log, server, host };
}

function plugin(name: string, options: { fail?: unknown; uninstallFails?: boolean; onInstall?: () => void } = {}): Plugin<FakeServer> {
  return {
    name,
    async install(server) {
      server.calls.push(`install ${name}`);
      options.onInstall?.();
      if (options.fail !== undefined) throw options.fail;
    },
    async uninstall(server) {
      server.calls.push(`uninstall ${name}`);
      if (options.uninstallFails) throw new Error(`${name} cannot let go`);
    },
  };
}

t.test('plugins install in registration order, a plugin registered during an install last; each gets the server, its own logger and the config', async (t) => {
  const { host, server, log, lines } = harness();
  const seen: Array<{ server: unknown; config: unknown }> = [];
  host.register(plugin('a', { onInstall: () => host.register(plugin('a-child')) }));
  host.register({
    name: 'b',
    install(received, pluginLog, received2) {
      received.calls.push('install b');
      seen.push({ server: received, config: received2 });
      pluginLog.info('hello from b');
    },
  });
  await host.installAll(server, log, config);
  t.same(server.calls, ['install a', 'install b', 'install a-child']);
  t.equal(seen[0]!.server, server, 'the server itself');
  t.equal(seen[0]!.config, config, 'the resolved config');
  t.match(lines, [{ plugin: 'b', msg: 'hello from b' }], "the logger is a child naming the plugin");
  t.same(host.names, ['a', 'b', 'a-child']);
});

t.test('uninstall runs in reverse order; a failing uninstall is logged and the others still run; a plugin without uninstall is skipped', async (t) => {
  const { host, server, log, lines } = harness();
  host.register(plugin('first'));
  host.register({ name: 'no-uninstall', install: () => {} });
  host.register(plugin('flaky', { uninstallFails: true }));
  host.register(plugin('last'));
  await host.installAll(server, log, config);
  await host.uninstallAll(server, log);
  t.same(server.calls.filter((call) => call.startsWith('uninstall')), ['uninstall last', 'uninstall flaky', 'uninstall first']);
  t.match(lines, [{ level: 50, plugin: 'flaky', msg: 'plugin uninstall failed', err: { message: 'flaky cannot let go' } }]);
  await host.uninstallAll(server, log);
  t.equal(server.calls.filter((call) => call.startsWith('uninstall')).length, 3, 'a second uninstallAll does nothing');
});

t.test('an install failure rejects with one line naming the plugin, keeps the cause, uninstalls what was installed and installs nothing after it', async (t) => {
  const { host, server, log } = harness();
  const cause = new Error('no licence\n    at somewhere (file.js:1:1)');
  host.register(plugin('ok'));
  host.register(plugin('licence', { fail: cause }));
  host.register(plugin('after'));
  const error = await host.installAll(server, log, config).then(
    () => undefined,
    (rejection: Error) => rejection,
  );
  t.equal(error?.message, 'plugin "licence" failed to install: no licence');
  t.equal(error?.cause, cause);
  t.same(server.calls, ['install ok', 'install licence', 'uninstall ok'], 'the failing plugin is not uninstalled, the next not installed');
});

t.test('a non-Error thrown by an install is reported too', async (t) => {
  const { host, server, log } = harness();
  host.register(plugin('odd', { fail: 'a string' }));
  await t.rejects(host.installAll(server, log, config), { message: 'plugin "odd" failed to install: a string' });
});

t.test('after close(), registration and the worker-shaping calls are refused with the reason', async (t) => {
  const { host, server, log } = harness();
  host.register(plugin('early'));
  await host.installAll(server, log, config);
  t.doesNotThrow(() => host.assertOpen('patchWorkerEnv()'), 'open until the workers are forked');
  host.close();
  t.throws(() => host.register(plugin('late')), { message: /^use\(\): the workers were already forked/ });
  t.throws(() => host.assertOpen('overrideWorkerCount()'), { message: /^overrideWorkerCount\(\): the workers were already forked/ });
  t.same(host.names, ['early']);
});

t.test('malformed plugins and duplicate names are refused at registration', async (t) => {
  const { host } = harness();
  t.throws(() => host.register(null as never), { message: /a plugin is an object/ });
  t.throws(() => host.register({ name: '', install: () => {} }), { message: /non-empty string name/ });
  t.throws(() => host.register({ name: 'x' } as never), { message: /plugin "x" has no install\(\) function/ });
  t.throws(() => host.register({ name: 'x', install: () => {}, uninstall: 'no' } as never), { message: /uninstall must be a function/ });
  host.register({ name: 'x', install: () => {} });
  t.throws(() => host.register({ name: 'x', install: () => {} }), { message: /a plugin named "x" is already registered/ });
});
