import t from 'tap';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { loadConfig } from '../../src/config/load.js';
import { ConfigError } from '../../src/config/errors.js';

const tmp = () => mkdtempSync(path.join(tmpdir(), 'fleetplane-config-'));

function configError(fn: () => unknown): ConfigError {
  try {
    fn();
  } catch (error) {
    if (error instanceof ConfigError) return error;
    throw error;
  }
  throw new Error('expected a ConfigError');
}

t.test('resolved config carries every default', async (t) => {
  const { config } = loadConfig({ env: {}, cwd: tmp() });
  t.equal(config.http.port, 8080);
  t.equal(config.workers.count, 'auto');
  t.equal(config.restart.backoffMs <= 250, true, 'first restart is fast');
  t.equal(config.shutdown.timeoutMs, 12_000);
  t.equal(path.basename(config.dataDir), 'data');
});

t.test('file, then environment, then flags', async (t) => {
  const dir = tmp();
  writeFileSync(path.join(dir, 'fleetplane.config.json'), JSON.stringify({ http: { port: 1000 }, workers: 3, fallback: { redirect: 'https://lb.example' } }));
  const fromFile = loadConfig({ env: {}, cwd: dir }).config;
  t.equal(fromFile.http.port, 1000);
  t.equal(fromFile.workers.count, 3, 'workers shorthand');
  const fromEnv = loadConfig({ env: { FLEETPLANE_HTTP_PORT: '2000', FLEETPLANE_WORKERS: 'auto', FLEETPLANE_FALLBACK_REDIRECT: 'https://other.example' }, cwd: dir }).config;
  t.equal(fromEnv.http.port, 2000);
  t.equal(fromEnv.workers.count, 'auto');
  t.equal(fromEnv.fallback.redirect, 'https://other.example');
  const fromFlags = loadConfig({ env: { FLEETPLANE_HTTP_PORT: '2000' }, cwd: dir, flags: { port: '3000', workers: '0', dataDir: 'elsewhere' } }).config;
  t.equal(fromFlags.http.port, 3000);
  t.equal(fromFlags.workers.count, 0);
  t.equal(fromFlags.dataDir, path.join(dir, 'elsewhere'));
});

t.test('unknown keys fail with the field path and a did-you-mean', async (t) => {
  t.match(configError(() => loadConfig({ env: {}, object: { htp: { port: 1 } } })), { field: 'htp', message: /did you mean "http"/ });
  t.match(configError(() => loadConfig({ env: {}, object: { health: { maxRssMb: 100 } } })), { field: 'health.maxRssMb', message: /did you mean "workers.maxRssMb"/ });
  t.match(configError(() => loadConfig({ env: {}, object: { restart: { backofMs: 1 } } })), { message: /did you mean "restart.backoffMs"/ });
});

t.test('schema violations name the field and the reason', async (t) => {
  t.match(configError(() => loadConfig({ env: {}, object: { http: { port: 70_000 } } })), { field: 'http.port', message: /70000/ });
  t.match(configError(() => loadConfig({ env: { FLEETPLANE_HTTP_PORT: 'eighty' } })), { field: 'http.port' });
  t.match(configError(() => loadConfig({ env: {}, object: { workers: 'many' } })), { field: 'workers.count' });
});

t.test('a config file with a syntax error names the file', async (t) => {
  const dir = tmp();
  const file = path.join(dir, 'broken.json');
  writeFileSync(file, '{ "http": { "port": 80, } }');
  const error = configError(() => loadConfig({ env: {}, flags: { config: file } }));
  t.match(error.message, file);
  t.match(error.message, /invalid JSON/);
  t.match(configError(() => loadConfig({ env: {}, flags: { config: path.join(dir, 'missing.json') } })).message, /cannot read config file/);
});

t.test('forbidden execArgv and env keys are refused with the value named', async (t) => {
  for (const flag of ['--inspect', '--require=./evil.js', '-r', '--import=x', '--cpu-prof', '--report-on-signal']) {
    t.match(configError(() => loadConfig({ env: {}, object: { workers: { execArgv: [flag] } } })).message, flag, flag);
  }
  t.equal(loadConfig({ env: {}, object: { workers: { execArgv: ['--max-old-space-size=256'] } } }).config.workers.execArgv[0], '--max-old-space-size=256');
  for (const key of ['__proto__', 'constructor', 'prototype']) {
    const object = JSON.parse(`{"workers":{"env":{"${key}":"x"}}}`);
    t.match(configError(() => loadConfig({ env: {}, object })), { field: `workers.env.${key}` }, key);
  }
  t.match(loadConfig({ env: {}, object: { workers: { env: { NODE_OPTIONS: '--max-old-space-size=64' } } } }).warnings[0], /NODE_OPTIONS/);
});

t.test('recycle policies need heartbeats', async (t) => {
  t.match(configError(() => loadConfig({ env: {}, object: { workers: { maxRssMb: 100 }, health: { heartbeatMs: 0 } } })), { field: 'health.heartbeatMs' });
  t.match(configError(() => loadConfig({ env: {}, object: { health: { heartbeatMs: 1000, wedgedTimeoutMs: 1500 } } })), { field: 'health.wedgedTimeoutMs' });
});

t.test('an invalid value is blamed on where it came from (variable, flag or file) and described in words', async (t) => {
  const dir = tmp();
  writeFileSync(path.join(dir, 'fleetplane.config.json'), JSON.stringify({ http: { host: '127.0.0.1' } }));
  const fromEnv = configError(() => loadConfig({ env: { FLEETPLANE_HTTP_PORT: 'abc' }, cwd: dir }));
  t.equal(fromEnv.message, 'environment variable FLEETPLANE_HTTP_PORT: http.port: expected an integer from 0 to 65535 (got "abc")');
  const fromFlag = configError(() => loadConfig({ env: {}, cwd: dir, flags: { port: '70000' } }));
  t.equal(fromFlag.message, 'flag --port: http.port: expected an integer from 0 to 65535 (got 70000)');
  const workers = configError(() => loadConfig({ env: {}, cwd: dir, flags: { workers: 'lots' } }));
  t.equal(workers.message, 'flag --workers: workers.count: expected "auto" or an integer from 0 to 256 (got "lots")');
  writeFileSync(path.join(dir, 'fleetplane.config.json'), JSON.stringify({ http: { port: 'eighty' } }));
  const fromFile = configError(() => loadConfig({ env: {}, cwd: dir }));
  t.equal(fromFile.message, `${path.join(dir, 'fleetplane.config.json')}: http.port: expected an integer from 0 to 65535 (got "eighty")`);
});

t.test('workers.env keys __proto__, constructor and prototype are refused from a variable as from a file', async (t) => {
  for (const key of ['__proto__', 'constructor', 'prototype']) {
    const error = configError(() => loadConfig({ env: { FLEETPLANE_WORKERS_ENV: `{"${key}": {"polluted": "yes"}}` }, cwd: tmp() }));
    t.equal(error.message, `environment variable FLEETPLANE_WORKERS_ENV: workers.env.${key}: environment key "${key}" is refused`);
  }
  t.equal(({} as Record<string, unknown>).polluted, undefined, 'nothing was polluted');
});

t.test("manager.localConfig is checked as the config of the servers the local provider starts", async (t) => {
  const { config } = loadConfig({ env: {}, object: { manager: { localConfig: { autoscaler: { enabled: true, intervalMs: 200 }, shutdown: { timeoutMs: 3_000 } } } } });
  t.same(config.manager.localConfig, { autoscaler: { enabled: true, intervalMs: 200 }, shutdown: { timeoutMs: 3_000 } }, 'kept as given: the started servers resolve their own defaults');
  t.match(configError(() => loadConfig({ env: {}, object: { manager: { localConfig: { autoscaler: { intervalMs: 5 } } } } })), { field: 'manager.localConfig.autoscaler.intervalMs', message: /at least 100/ });
  t.match(configError(() => loadConfig({ env: {}, object: { manager: { localConfig: { autoscaler: { enabeld: true } } } } })), { field: 'manager.localConfig.autoscaler.enabeld', message: /unknown key/ });
  t.match(configError(() => loadConfig({ env: { FLEETPLANE_MANAGER_LOCAL_CONFIG: '{"htp":{}}' } })), { field: 'manager.localConfig.htp', message: /FLEETPLANE_MANAGER_LOCAL_CONFIG/ });
});
