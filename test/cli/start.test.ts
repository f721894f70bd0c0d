import t from 'tap';
import { readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { startCli, tempDir } from './fixtures/cli.js';
import { autoInitialize } from '../../cli/init.js';
import { loadConfig } from '../../src/config/load.js';
import { scaled } from '../helpers/wait.js';

t.setTimeout(scaled(300_000));

t.test('start on an empty data directory saves the admin key with mode 0600 and, stdout not being a terminal, prints where it is instead of the key', async (t) => {
  const dataDir = tempDir();
  const { child, done } = startCli(['start', '--workers', '0', '--port', '0', '--data-dir', dataDir], { env: { FLEETPLANE_HTTP_HOST: '127.0.0.1' } });
  t.teardown(() => {
    if (child.exitCode === null) child.kill('SIGKILL');
  });
  let output = '';
  child.stdout!.on('data', (chunk) => (output += chunk));
  await new Promise<void>((resolve, reject) => {
    const check = () => (output.includes('"fleetplane started"') ? resolve() : undefined);
    child.stdout!.on('data', check);
    child.once('exit', (code) => reject(new Error(`start exited early with ${code}: ${output}`)));
  });
  child.kill('SIGTERM');
  const result = await done;
  t.equal(result.code, 0, 'graceful exit after SIGTERM');

  const file = path.join(dataDir, 'admin.key');
  const key = readFileSync(file, 'utf8').trim();
  t.match(key, /^fpk_[A-Za-z0-9_-]{16}\.[A-Za-z0-9_-]{43}$/);
  t.equal(statSync(file).mode & 0o777, 0o600);
  const everything = result.stdout + result.stderr;
  const secret = key.split('.')[1]!;
  t.notOk(everything.includes(secret), 'the key is not printed to a pipe');
  t.match(result.stdout, `saved to ${file} (mode 0600); read it from there.`);
  const logLines = everything.split('\n').filter((line) => line.startsWith('{'));
  t.ok(logLines.length > 0, 'the server logged');
  t.notOk(logLines.some((line) => line.includes(secret)), 'no log line holds the key');
});

t.test('first start: the key is printed once to a terminal; a data directory that does not exist yet is created; a second start prints nothing', async (t) => {
  const dataDir = path.join(tempDir(), 'not', 'yet');
  const storeDir = tempDir();
  const config = loadConfig({ env: {}, object: { dataDir, db: { path: path.join(storeDir, 'shared.db') } } }).config;
  const written: string[] = [];
  const terminal = { isTTY: true, write: (chunk: string) => written.push(chunk) > 0 } as unknown as NodeJS.WritableStream;
  await autoInitialize(config, terminal);
  const key = readFileSync(path.join(dataDir, 'admin.key'), 'utf8').trim();
  t.equal(written.join('').split(key).length - 1, 1, 'the key is printed exactly once');
  t.equal(statSync(path.join(dataDir, 'admin.key')).mode & 0o777, 0o600);
  written.length = 0;
  await autoInitialize(config, terminal);
  t.same(written, [], 'an initialized store prints nothing');
});
