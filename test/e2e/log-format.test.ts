import t, { type Test } from 'tap';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { CLI, cleanEnv, freePort, request, tempDir } from '../helpers/server-process.js';
import { own, killOwned } from '../helpers/processes.js';
import { readPidFile } from '../../src/runtime/pid-file.js';
import { scaled, until } from '../helpers/wait.js';

/** A pretty record: local time, level, `<server>/<process>`, then the message. */
const PRETTY = /^\d\d:\d\d:\d\d\.\d{3} (TRACE|DEBUG|INFO |WARN |ERROR|FATAL) \S+\/(primary|w\d+) {2}\S/;

interface Running {
  child: ChildProcess;
  output: () => string;
  lines: () => string[];
  dataDir: string;
  port: number;
}

/** `fleetplane start` with one worker and the access log on, its output collected; stopped with the test. */
async function start(t: Test, wrap: (argv: string[]) => [string, string[]], env: NodeJS.ProcessEnv = {}): Promise<Running> {
  const dataDir = tempDir();
  const port = await freePort();
  const [command, args] = wrap([process.execPath, CLI, 'start', '--port', String(port), '--workers', '1', '--data-dir', dataDir]);
  const child = own(spawn(command, args, { env: { ...cleanEnv(), FLEETPLANE_LOG_REQUESTS: 'true', FLEETPLANE_HTTP_HOST: '127.0.0.1', ...env }, detached: true, stdio: ['ignore', 'pipe', 'pipe'] }), { group: true });
  let output = '';
  child.stdout!.on('data', (chunk) => (output += chunk));
  child.stderr!.on('data', (chunk) => (output += chunk));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  t.teardown(async () => {
    // Under `script` the server leads a session of its own: it is stopped through its pid file.
    const pid = readPidFile(dataDir);
    if (pid) {
      try {
        process.kill(pid, 'SIGTERM');
      } catch {
        // gone
      }
    }
    await Promise.race([exited, new Promise((resolve) => setTimeout(resolve, scaled(15_000)).unref())]);
    killOwned(child);
  });
  const lines = () => output.replaceAll('\r', '').split('\n').filter(Boolean);
  return { child, output: () => output, lines, dataDir, port };
}

/** The server answers a request through its worker, so the worker writes an access-log record. */
async function workerLogs(server: Running, predicate: (line: string) => boolean): Promise<string> {
  // Probes are not in the access log: any other path is.
  await until('a worker to answer', async () => ((await request(server.port, '/no-such-page').catch(() => undefined))?.status === 404 ? true : undefined), 30_000, { everyMs: 100, last: () => server.output().slice(-2000) });
  return until('a record from worker 1', () => server.lines().find(predicate), 20_000, { everyMs: 50, last: () => server.output().slice(-2000) });
}

const hasScript = spawnSync('script', ['--version'], { encoding: 'utf8' }).status === 0;

t.test('on a terminal the primary and its workers write readable lines, not JSON', { skip: hasScript ? false : 'needs script(1) for a terminal' }, async (t) => {
  // script(1) gives the command a pseudo-terminal as stdout: what an operator's shell is.
  const server = await start(t, (argv) => ['script', ['-q', '-e', '-c', argv.map((arg) => `'${arg}'`).join(' '), '/dev/null']]);
  const started = await until('the started line', () => server.lines().find((line) => line.includes('fleetplane started')), 30_000, { everyMs: 50, last: () => server.output().slice(-2000) });
  t.match(started, PRETTY, `the primary's line is readable: ${started}`);
  t.match(started, /\/primary {2}fleetplane started {2}ports=\{"http":\d+\} workers=1 /);
  const worker = await workerLogs(server, (line) => /\/w1 {2}request completed/.test(line));
  t.match(worker, PRETTY, `a worker's line is readable too: ${worker}`);
  t.match(worker, / status=404 responseTime=\d+(\.\d{1,2})?( |$)/, 'the status and the time it took, rounded');
  t.ok(server.lines().some((line) => /\/w1 {2}incoming request {2}.*req="GET \/no-such-page"/.test(line)), 'the request as method and path');
  t.notOk(server.lines().some((line) => line.startsWith('{')), 'no JSON line on the terminal');
});

t.test('log.format "pretty" reaches the workers even when stdout is a pipe; a pipe is JSON by default', async (t) => {
  const pretty = await start(t, (argv) => [argv[0]!, argv.slice(1)], { FLEETPLANE_LOG_FORMAT: 'pretty' });
  const worker = await workerLogs(pretty, (line) => /\/w1 {2}request completed/.test(line));
  t.match(worker, PRETTY, 'the primary decided; the worker follows');

  const json = await start(t, (argv) => [argv[0]!, argv.slice(1)]);
  const record = await workerLogs(json, (line) => line.includes('"request completed"'));
  t.match(JSON.parse(record), { worker: 1, msg: 'request completed' }, 'stdout is not a terminal: JSON lines');
});

t.test('an unknown log.format is refused at start, naming the choices', async (t) => {
  const result = spawnSync(process.execPath, [CLI, 'start', '--data-dir', path.join(tempDir(), 'data')], { encoding: 'utf8', env: { ...cleanEnv(), FLEETPLANE_LOG_FORMAT: 'color' }, timeout: scaled(20_000) });
  t.equal(result.status, 2);
  t.match(result.stderr, /FLEETPLANE_LOG_FORMAT: log\.format: expected "auto" or "json" or "pretty" \(got "color"\)/);
});
