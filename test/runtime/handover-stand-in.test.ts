import t from 'tap';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { PID_FILE, writePidFile } from '../../src/runtime/pid-file.js';
import { own } from '../helpers/processes.js';
import { tempDir } from '../helpers/server-process.js';
import { until } from '../helpers/wait.js';

const ROOT = path.resolve(import.meta.dirname, '..', '..');
const MODULE = pathToFileURL(path.join(ROOT, 'src', 'runtime', 'handover-stand-in.ts')).href;
const PID_FILE_MODULE = pathToFileURL(path.join(ROOT, 'src', 'runtime', 'pid-file.ts')).href;

t.test('a stand-in forwards a signal caught as it took over to the primary the pid file names, then exits with it', async (t) => {
  const dataDir = tempDir('fleetplane-stand-in-');
  // The new primary: on SIGTERM it stops gracefully, removing its pid file as a primary does.
  const primary = own(
    spawn(process.execPath, ['--import', path.join(ROOT, 'test', 'helpers', 'ts-loader.mjs'), '--input-type=module', '-e', `
      import { removePidFile } from ${JSON.stringify(PID_FILE_MODULE)};
      process.on('SIGTERM', () => { process.stdout.write('SIGTERM\\n'); removePidFile(${JSON.stringify(dataDir)}); process.exit(0); });
      setInterval(() => {}, 60_000);
      process.stdout.write('ready\\n');
    `], { cwd: ROOT, stdio: ['ignore', 'pipe', 'inherit'] }),
    { group: false },
  );
  let primaryOutput = '';
  primary.stdout!.on('data', (chunk) => (primaryOutput += chunk));
  const primaryExit = once(primary, 'exit');
  await until('the new primary to listen', () => (primaryOutput.includes('ready') ? true : undefined));
  writePidFile(dataDir, primary.pid!);

  // The old primary: its own SIGTERM handler, a SIGTERM caught (sent to itself) and not yet delivered, and then,
  // in the same turn of its loop, it becomes the stand-in.
  const standIn = own(
    spawn(process.execPath, ['--import', path.join(ROOT, 'test', 'helpers', 'ts-loader.mjs'), '--input-type=module', '-e', `
      import { standIn } from ${JSON.stringify(MODULE)};
      process.on('SIGTERM', () => process.stdout.write('the old primary stopped\\n'));
      process.kill(process.pid, 'SIGTERM');
      const quiet = { warn() {}, error() {}, info() {} };
      standIn(${JSON.stringify(dataDir)}, quiet, 20);
    `], { cwd: ROOT, stdio: ['ignore', 'pipe', 'inherit'] }),
    { group: false },
  );
  let standInOutput = '';
  standIn.stdout!.on('data', (chunk) => (standInOutput += chunk));
  const standInExit = once(standIn, 'exit');

  await until('the new primary to receive the forwarded SIGTERM', () => (primaryOutput.includes('SIGTERM') ? true : undefined), 10_000, {
    last: () => ({ primary: primaryOutput, standIn: standInOutput }),
  });
  // It says so before it removes its pid file: what it left is looked at once it has exited.
  const [primaryCode] = await primaryExit;
  t.equal(primaryCode, 0);
  t.notOk(existsSync(path.join(dataDir, PID_FILE)), 'the primary stopped gracefully');
  const [code] = await standInExit;
  t.equal(code, 0, 'the stand-in exits 0 once the primary stopped gracefully');
  t.equal(standInOutput, '', "the old primary's handler was replaced before the signal was delivered");
});
