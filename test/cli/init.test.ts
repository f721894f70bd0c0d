import t from 'tap';
import { existsSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { autoInitialize, init } from '../../cli/init.js';
import { Authorizer } from '../../src/auth/authorize.js';
import { localHosts } from '../../src/auth/organizations.js';
import { loadConfig } from '../../src/config/load.js';
import { openStore } from '../../src/db/open.js';
import { output, runCli, tempDir } from './fixtures/cli.js';
import { scaled } from '../helpers/wait.js';

// A CLI process compiles the sources on start, which takes seconds on a busy machine.
t.setTimeout(scaled(300_000));

const configFor = (dataDir: string) => loadConfig({ env: {}, object: { dataDir } }).config;
const KEY = /fpk_[A-Za-z0-9_-]{16}\.[A-Za-z0-9_-]{43}/;

t.test('fleetplane init --json prints one JSON object with an admin key that works on the given hosts', async (t) => {
  const dataDir = tempDir();
  const result = await runCli(['init', '--json', '--org', 'acme', '--host', 'acme.example', '--host', 'Admin.Example:8443', '--data-dir', dataDir]);
  t.equal(result.code, 0, result.stderr);
  const lines = result.stdout.trim().split('\n');
  t.equal(lines.length, 1, 'one JSON object');
  const created = JSON.parse(lines[0]!);
  t.match(created, { organization_id: String, key_id: /^fpk_/, key: KEY });
  t.equal(created.key.split('.')[0], created.key_id);

  const store = await openStore(configFor(dataDir));
  t.teardown(() => store.close());
  t.match(await store.collection('organizations').findOne({ _id: created.organization_id }), { name: 'acme', hosts: ['acme.example', 'admin.example'] });
  const authorized = await new Authorizer(store).request({ host: 'admin.example', headers: { authorization: `Bearer ${created.key}` } }, { method: 'shutdown' });
  t.match(authorized, { organization_id: created.organization_id, user: { key_id: created.key_id, admin: true } });

  const again = await runCli(['init', '--data-dir', dataDir, '--org', 'other']);
  t.equal(again.code, 1, 'a second init fails');
  t.equal(again.stderr.trim().split('\n').length, 1, 'with one line');
  t.match(again.stderr, /^fleetplane: the store \(.*fleetplane\.db\) is already initialized/);
  t.equal(await store.collection('organizations').countDocuments(), 1, 'no second organization');
  t.equal(await store.collection('keys').countDocuments(), 1, 'no second key');
});

t.test('init prints the key once; by default the organization is "default" on this machine\'s names', async (t) => {
  const dataDir = tempDir();
  const printed = output();
  await init(['--data-dir', dataDir], printed.stream);
  const key = KEY.exec(printed.text())?.[0];
  t.ok(key, 'the key is printed');
  t.equal(printed.text().split(key!).length - 1, 1, 'once');
  const store = await openStore(configFor(dataDir));
  t.teardown(() => store.close());
  t.match(await store.collection('organizations').findOne({}), { name: 'default', hosts: localHosts() });
  await t.rejects(init(['--data-dir', dataDir], output().stream), { exitCode: 1, message: /already initialized/ });
});

t.test('init honours --config and refuses bad input with exit 2, writing nothing', async (t) => {
  const dir = tempDir();
  const dataDir = path.join(dir, 'from-config');
  const config = path.join(dir, 'fleetplane.config.json');
  writeFileSync(config, JSON.stringify({ dataDir }));
  await init(['--json', '--config', config], output().stream);
  t.ok(existsSync(path.join(dataDir, 'fleetplane.db')), 'the store is where the config file says');

  const empty = tempDir();
  await t.rejects(init(['--host', 'not a host', '--data-dir', empty], output().stream), { exitCode: 2, message: /--host must be host names/ });
  await t.rejects(init(['--org', '', '--data-dir', empty], output().stream), { exitCode: 2, message: /--org/ });
  await t.rejects(init(['--orgg', 'x', '--data-dir', empty], output().stream), { exitCode: 2, message: /^unknown option "--orgg" \(did you mean "--org"\?\)/ });
  t.notOk(existsSync(path.join(empty, 'fleetplane.db')), 'nothing was written');
  const help = output();
  await init(['--help'], help.stream);
  t.match(help.text(), /Usage: fleetplane init/);
});

t.test('on an empty store, start initializes "default", writes admin.key with mode 0600 and prints the key once to a terminal', async (t) => {
  const dataDir = tempDir();
  const printed = output();
  Object.assign(printed.stream, { isTTY: true });
  await autoInitialize(configFor(dataDir), printed.stream);
  const file = path.join(dataDir, 'admin.key');
  const key = readFileSync(file, 'utf8').trim();
  t.match(key, new RegExp(`^${KEY.source}$`));
  t.equal(statSync(file).mode & 0o777, 0o600);
  t.equal(printed.text().split(key).length - 1, 1, 'printed once');
  const store = await openStore(configFor(dataDir));
  t.teardown(() => store.close());
  t.match(await store.collection('organizations').findOne({}), { name: 'default', hosts: localHosts() });
  for (const host of ['localhost', '127.0.0.1', '::1']) t.ok(localHosts().includes(host), host);
  const authorized = await new Authorizer(store).request({ host: 'localhost:8080', headers: { authorization: `Bearer ${key}` } }, { method: 'metrics.read' });
  t.equal(authorized.user?.admin, true);

  const second = output();
  await autoInitialize(configFor(dataDir), second.stream);
  t.equal(second.text(), '', 'an initialized store is left alone, and nothing is printed');
  t.equal(readFileSync(file, 'utf8').trim(), key, 'admin.key is not replaced');
  t.equal(await store.collection('keys').countDocuments(), 1);
});
