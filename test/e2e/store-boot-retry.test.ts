import t from 'tap';
import { once } from 'node:events';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { freePort, startCli, tempDir } from '../helpers/server-process.js';
import { until } from '../helpers/wait.js';

t.test('an unreachable MongoDB at boot is retried with one log line per attempt; SIGTERM stops the wait', async (t) => {
  const dataDir = tempDir();
  // Nothing listens on this port: the store stays unreachable for the whole test.
  const storePort = await freePort();
  const file = path.join(dataDir, 'fleetplane.json');
  writeFileSync(
    file,
    JSON.stringify({
      dataDir,
      http: { port: await freePort(), host: '127.0.0.1' },
      mongodb: { url: `mongodb://127.0.0.1:${storePort}/fleet?replicaSet=rs0&directConnection=true`, serverSelectionTimeoutMs: 200 },
    }),
  );
  const child = startCli(t, ['start', '--config', file]);
  let output = '';
  const attempts = () => output.split('\n').filter((line) => line.includes('the store is unavailable (attempt')).length;
  let exit: number | null | undefined;
  child.stdout!.on('data', (chunk) => (output += chunk));
  child.stderr!.on('data', (chunk) => (output += chunk));
  child.once('exit', (code) => (exit = code));
  await until('two failed attempts to reach the store', () => {
    if (exit !== undefined) throw new Error(`the server exited (${exit}) while the store was down: ${output}`);
    return attempts() >= 2 ? true : undefined;
  }, 30_000, { last: () => output.slice(-500) });
  t.ok(attempts() >= 2, 'one warning per failed attempt');
  t.notMatch(output, /fleetplane started/, 'the server does not start without its store');
  const exited = once(child, 'exit');
  process.kill(child.pid!, 'SIGTERM');
  const [code] = await exited;
  t.not(code, null, 'exits on SIGTERM instead of waiting on');
  t.match(output, /stopped while waiting for the store|store/, 'says why it stopped');
});
