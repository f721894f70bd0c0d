import t from 'tap';
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { CLI, cleanEnv, freePort, request, tempDir } from '../helpers/server-process.js';
import { killOwned, own } from '../helpers/processes.js';
import { scaled, until } from '../helpers/wait.js';

t.setTimeout(scaled(180_000));

const README = readFileSync(path.resolve(import.meta.dirname, '..', '..', 'README.md'), 'utf8');

/** The first bash block after `heading` in README.md, as written. */
function recipe(heading: string): string {
  const start = README.indexOf(heading);
  const open = README.indexOf('```bash\n', start);
  const close = README.indexOf('\n```', open + 8);
  if (start < 0 || open < 0 || close < 0) throw new Error(`README has no bash block after "${heading}"`);
  return README.slice(open + 8, close);
}


/** A working directory where `npx fleetplane` is this build, as it is for a user who installed the package. */
function workingDirectory(): string {
  const cwd = tempDir();
  const bin = path.join(cwd, 'node_modules', '.bin', 'fleetplane');
  mkdirSync(path.dirname(bin), { recursive: true });
  writeFileSync(bin, `#!/bin/sh\nexec ${JSON.stringify(process.execPath)} ${JSON.stringify(CLI)} "$@"\n`, { mode: 0o755 });
  return cwd;
}

t.test('README "Three servers on one host", run as written (data directories not created beforehand): one admin key is saved, every server serves and they mesh', async (t) => {
  const script = recipe('### Three servers on one host');
  // Only the ports change: fixed ones could be taken on a shared machine.
  const ports = new Map<string, number>();
  for (const fixed of ['8080', '8081', '8082', '8090', '8091', '8092']) ports.set(fixed, await freePort());
  const run = script.replace(/=(80[89]\d)\b/g, (_match, port: string) => `=${ports.get(port)}`);
  t.not(run, script, 'the ports were found in the recipe');
  const cwd = workingDirectory();
  const shell = own(spawn('bash', ['-c', `${run}\nwait`], { cwd, detached: true, stdio: ['ignore', 'pipe', 'pipe'], env: { ...cleanEnv(), WEB_CONCURRENCY: '1' } }), { group: true });
  let output = '';
  shell.stdout!.on('data', (chunk) => (output += chunk));
  shell.stderr!.on('data', (chunk) => (output += chunk));
  t.teardown(() => killOwned(shell));
  let exited = false;
  shell.once('exit', () => (exited = true));

  for (const port of [ports.get('8080')!, ports.get('8081')!, ports.get('8082')!]) {
    const ready = await until(`the server on ${port} to be ready`, async () => (exited ? false : await request(port, '/readyz').then((reply) => reply.status === 200 || undefined, () => undefined)), 60_000, { everyMs: 100 });
    t.ok(ready, `the server on ${port} is ready ${exited ? output : ''}`);
  }
  const keyFiles = ['data-a', 'data-b', 'data-c'].map((dir) => path.join(cwd, dir, 'admin.key')).filter((file) => existsSync(file));
  t.equal(keyFiles.length, 1, 'exactly one server created the organization and saved its admin key');
  t.match(output, /saved to .*admin\.key \(mode 0600\); read it from there\./, 'where the key is, printed (stdout is not a terminal)');
  t.notMatch(output, /Error|ENOENT|\n\s+at /, 'no error and no stack trace');

  // "Check the links": the workers of all three servers answer through node A's control socket.
  let servers = new Set<string>();
  await until('ctl status --broadcast to answer from three servers', () => {
    const status = spawnSync('npx', ['fleetplane', 'ctl', 'status', '--broadcast', '--json', '--data-dir', './data-a'], { cwd, encoding: 'utf8', env: cleanEnv(), timeout: scaled(30_000) });
    if (status.status === 0) servers = new Set(JSON.parse(status.stdout).replies.map((reply: { server: string }) => reply.server));
    return servers.size === 3 || exited ? true : undefined;
  }, 60_000, { everyMs: 250, last: () => [...servers] }).catch(() => undefined);
  t.same([...servers].sort(), ['node-a', 'node-b', 'node-c'], 'ctl status --broadcast answers from all three servers');
});
