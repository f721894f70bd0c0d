import t from 'tap';
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { withoutTracker } from './plain-children.mjs';

// What a child has of the options every Node.js process reads.
const probe = 'process.stdout.write(JSON.stringify(process.env.NODE_OPTIONS ?? null))';

t.test('a child a test starts gets the NODE_OPTIONS it was given: no loader of the test runner added', async (t) => {
  t.ok(process.execArgv.some((argument) => argument.includes('@tapjs/processinfo')), 'this test process runs with the tracker');
  const env = { ...process.env, NODE_OPTIONS: '--max-old-space-size=64' };
  t.equal(JSON.parse(execFileSync(process.execPath, ['-e', probe], { env, encoding: 'utf8' })), '--max-old-space-size=64', 'execFileSync: as given');
  t.equal(JSON.parse(spawnSync(process.execPath, ['-e', probe], { encoding: 'utf8' }).stdout), null, 'spawnSync, inheriting this environment: none');
  const child = spawn(process.execPath, ['-e', probe], { stdio: ['ignore', 'pipe', 'inherit'] });
  let output = '';
  child.stdout.on('data', (chunk) => (output += chunk));
  await new Promise((resolve) => child.once('close', resolve));
  t.equal(JSON.parse(output), null, 'spawn: none');
});

t.test('NODE_OPTIONS loses the tracker’s loader and keeps everything else', async (t) => {
  const tracker = '"--import=file:///srv/app/node_modules/@tapjs/processinfo/dist/esm/import.mjs"';
  t.equal(withoutTracker(tracker), undefined, 'nothing else: no NODE_OPTIONS at all');
  t.equal(withoutTracker(`--max-old-space-size=64 ${tracker} --no-warnings`), '--max-old-space-size=64 --no-warnings');
  t.equal(withoutTracker('--loader=/x/@tapjs/processinfo/dist/esm/loader.mjs --trace-gc'), '--trace-gc', 'the older --loader form too');
  t.equal(withoutTracker('--require "/a b/c.js" --import=./mine.mjs'), '--require "/a b/c.js" --import=./mine.mjs', 'another loader stays, quotes and all');
  t.equal(withoutTracker(undefined), undefined);
});
