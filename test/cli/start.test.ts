import t from 'tap';
import { readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { startCli, tempDir } from './fixtures/cli.js';

t.setTimeout(300_000);

t.test('start on an empty data directory creates the admin key, saves it with mode 0600 and prints it once, never in a log line', async (t) => {
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
  t.equal(everything.split(key).length - 1, 1, 'the key is printed exactly once');
  const secret = key.split('.')[1]!;
  const logLines = everything.split('\n').filter((line) => line.startsWith('{'));
  t.ok(logLines.length > 0, 'the server logged');
  t.notOk(logLines.some((line) => line.includes(secret)), 'no log line holds the key');
});
