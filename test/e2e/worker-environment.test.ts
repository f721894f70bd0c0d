import t from 'tap';
import { once } from 'node:events';
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { freePort, startCli, request, tempDir } from '../helpers/server-process.js';

t.test('a worker gets the resolved config over IPC: no secret of it in its environment', { skip: process.platform !== 'linux' && 'reads /proc' }, async (t) => {
  const secret = 'mesh-secret-that-must-stay-out-of-environ';
  const dataDir = tempDir();
  const port = await freePort();
  const file = path.join(dataDir, 'fleetplane.json');
  writeFileSync(file, JSON.stringify({ workers: 1, dataDir, http: { port, host: '127.0.0.1' }, mesh: { secret, port: 0 } }));
  const child = startCli(t, ['start', '--config', file]);
  let output = '';
  child.stderr!.on('data', (chunk) => (output += chunk));
  // The primary logs each worker it sees ready, with its pid.
  const pid = await new Promise<number>((resolve, reject) => {
    let buffered = '';
    child.stdout!.on('data', (chunk) => {
      buffered += chunk;
      for (const line of buffered.split('\n')) {
        if (!line.includes('"worker ready"')) continue;
        resolve(JSON.parse(line).pid);
      }
    });
    child.once('exit', (code) => reject(new Error(`the server exited (${code}): ${output}`)));
  });
  const environ = readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0');
  t.ok(environ.some((entry) => entry.startsWith('FLEETPLANE_INTERNAL_WORKER=')), 'the environment read is the worker’s');
  t.notOk(environ.some((entry) => entry.includes(secret)), 'the mesh secret is in no variable');
  t.notOk(environ.some((entry) => entry.startsWith('FLEETPLANE_INTERNAL_CONFIG=')), 'the config is not passed through the environment');
  t.equal((await request(port, '/healthz')).status, 200, 'the worker booted with the config it asked for');
  process.kill(child.pid!, 'SIGTERM');
  t.same(await once(child, 'exit'), [0, null], 'stops with exit 0');
});
