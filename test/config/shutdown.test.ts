import t from 'tap';
import { loadConfig } from '../../src/config/load.js';
import { ConfigError } from '../../src/config/errors.js';

const load = (shutdown: Record<string, unknown>, env: NodeJS.ProcessEnv = {}) => loadConfig({ object: { shutdown }, env });

t.test('shutdown.timeoutMs below its documented minimum (1000 ms, as in clusterkit) is refused, naming the minimum', async (t) => {
  for (const timeoutMs of [0, 500, 999]) {
    t.throws(() => load({ timeoutMs }), { name: 'ConfigError', field: 'shutdown.timeoutMs', message: new RegExp(`^shutdown\\.timeoutMs: expected an integer of at least 1000 \\(got ${timeoutMs}\\)`) }, `${timeoutMs} ms`);
  }
  const fromEnvironment = (() => {
    try {
      load({}, { FLEETPLANE_SHUTDOWN_TIMEOUT_MS: '500' });
    } catch (error) {
      return error;
    }
  })();
  t.ok(fromEnvironment instanceof ConfigError, 'from the environment: a ConfigError');
  t.match((fromEnvironment as Error).message, /at least 1000.*FLEETPLANE_SHUTDOWN_TIMEOUT_MS|FLEETPLANE_SHUTDOWN_TIMEOUT_MS.*at least 1000/, 'naming the minimum and the variable');
  t.equal(load({ timeoutMs: 1000 }).config.shutdown.timeoutMs, 1000, 'the minimum itself is accepted');
  t.equal(load({}).config.shutdown.timeoutMs, 12_000, 'the default is unchanged');
});

t.test("shutdown.messagePrefix is accepted (clusterkit's key): the prefix of the shutdown notice's type", async (t) => {
  t.equal(load({ messagePrefix: '__wm' }).config.shutdown.messagePrefix, '__wm');
  t.equal(load({}).config.shutdown.messagePrefix, 'fleetplane', 'default');
  t.equal(load({}, { FLEETPLANE_SHUTDOWN_MESSAGE_PREFIX: 'app' }).config.shutdown.messagePrefix, 'app', 'from the environment');
  for (const messagePrefix of ['', 'has space', 'x'.repeat(33), 'a:b']) {
    t.throws(() => load({ messagePrefix }), { name: 'ConfigError', field: 'shutdown.messagePrefix' }, JSON.stringify(messagePrefix));
  }
});
