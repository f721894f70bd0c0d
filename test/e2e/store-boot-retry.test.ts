import t from 'tap';
import { once } from 'node:events';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { freePort, startCli, tempDir } from '../helpers/server-process.js';

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
  await new Promise<void>((resolve, reject) => {
    const check = () => {
      if (attempts() >= 2) resolve();
    };
    child.stdout!.on('data', (chunk) => {
      output += chunk;
      check();
    });
    child.stderr!.on('data', (chunk) => (output += chunk));
    child.once('exit', (code) => reject(new Error(`the server exited (${code}) while the store was down: ${output}`)));
  });
  t.ok(attempts() >= 2, 'one warning per failed attempt');
  t.notMatch(output, /fleetplane started/, 'the server does not start without its store');
  const exited = once(child, 'exit');
  process.kill(child.pid!, 'SIGTERM');
  const [code] = await exited;
  t.not(code, null, 'exits on SIGTERM instead of waiting on');
  t.match(output, /stopped while waiting for the store|store/, 'says why it stopped');
});
