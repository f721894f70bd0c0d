import t from 'tap';
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { resolveWorkerCount } from '../../src/config/sizing.js';
import { CLI, ServerProcess, cleanEnv, freePort, isAlive, request, startCli, tempDir } from '../helpers/server-process.js';
import { scaled, until } from '../helpers/wait.js';

const run = (args: string[], env: NodeJS.ProcessEnv = {}) =>
  spawnSync(process.execPath, [CLI, ...args], { encoding: 'utf8', timeout: scaled(20_000), env: { ...cleanEnv(), ...env }, cwd: tempDir() });


t.test('start --help prints the usage and exits 0', async (t) => {
  const result = run(['start', '--help']);
  t.equal(result.status, 0);
  t.match(result.stdout, /Usage: fleetplane start/);
  t.match(result.stdout, /--workers N\|auto/);
});

t.test('a mistyped flag is one line naming the closest real one, exit 2', async (t) => {
  const result = run(['start', '--prot', '80']);
  t.equal(result.status, 2);
  t.equal(result.stderr, 'fleetplane: unknown option "--prot" (did you mean "--port"?); see "fleetplane start --help"\n');
  const ctl = run(['ctl', 'status', '--brodcast']);
  t.equal(ctl.stderr, 'fleetplane: unknown option "--brodcast" (did you mean "--broadcast"?); see "fleetplane ctl --help"\n');
  t.equal(ctl.status, 2);
});

t.test('a mistyped command is one line, exit 2, and never suggests a command that acts', async (t) => {
  const typo = run(['stauts']);
  t.equal(typo.status, 2);
  t.equal(typo.stderr, 'fleetplane: unknown command "stauts" (did you mean "status"?); see "fleetplane --help"\n', 'as close to start as to status: the one that only reads');
  const acting = run(['strat']);
  t.equal(acting.status, 2);
  t.equal(acting.stderr, 'fleetplane: unknown command "strat"; see "fleetplane --help"\n', 'closest to start, which boots a server: not suggested');
  t.equal(run(['ctll']).stderr, 'fleetplane: unknown command "ctll"; see "fleetplane --help"\n');
});

t.test('--version prints the package version', async (t) => {
  const version = JSON.parse(readFileSync(path.resolve(import.meta.dirname, '..', '..', 'package.json'), 'utf8')).version;
  for (const flag of ['--version', '-v']) {
    const result = run([flag]);
    t.equal(result.status, 0);
    t.equal(result.stdout, `fleetplane ${version}\n`);
  }
});

t.test('an invalid config file exits 2 naming the field or the syntax error', async (t) => {
  const dir = tempDir();
  const broken = path.join(dir, 'broken.json');
  writeFileSync(broken, '{ "http": ');
  const syntax = run(['start', '--config', broken]);
  t.equal(syntax.status, 2);
  t.match(syntax.stderr, /invalid configuration: .*broken\.json: invalid JSON/);
  t.equal(syntax.stderr.trim().split('\n').length, 1, 'one line');

  const wrong = path.join(dir, 'wrong.json');
  writeFileSync(wrong, JSON.stringify({ http: { port: 'eighty' }, dataDir: dir }));
  const schema = run(['start', '--config', wrong]);
  t.equal(schema.status, 2);
  t.match(schema.stderr, /wrong\.json: http\.port: expected an integer from 0 to 65535 \(got "eighty"\)/);

  const typo = path.join(dir, 'typo.json');
  writeFileSync(typo, JSON.stringify({ shutdwn: {} }));
  t.match(run(['start', '--config', typo]).stderr, /shutdwn: unknown key \(did you mean "shutdown"\?\)/);
});

t.test('forbidden execArgv is refused at start with the value named', async (t) => {
  const dir = tempDir();
  const file = path.join(dir, 'config.json');
  writeFileSync(file, JSON.stringify({ workers: { execArgv: ['--inspect=0.0.0.0:9229'] }, dataDir: dir }));
  const result = run(['start', '--config', file]);
  t.equal(result.status, 2);
  t.match(result.stderr, /workers\.execArgv\[0\]: flag "--inspect=0\.0\.0\.0:9229" is refused/);
});

t.test('a port in use: one clear line and exit 1', async (t) => {
  const blocker = net.createServer();
  await new Promise<void>((resolve) => blocker.listen(0, '0.0.0.0', resolve));
  t.teardown(() => blocker.close());
  const { port } = blocker.address() as net.AddressInfo;
  const dataDir = tempDir();
  const result = run(['start', '--port', String(port), '--workers', '1', '--data-dir', dataDir]);
  t.equal(result.status, 1);
  t.match(result.stderr, new RegExp(`fleetplane: http\\.port ${port} on 0\\.0\\.0\\.0 is already in use`));
  t.equal(result.stderr.trim().split('\n').length, 1, 'one line');
  t.notOk(existsSync(path.join(dataDir, 'admin.key')), 'no admin key was created for a start that failed');
  t.notMatch(result.stdout, /admin key/, 'and none was announced');
});

t.test('a second server on the data directory of a running one: one line and exit 1', async (t) => {
  const dataDir = tempDir();
  const first = await ServerProcess.start({ workers: 1, dataDir });
  t.teardown(() => first.stop());
  const result = run(['start', '--port', String(await freePort()), '--workers', '1', '--data-dir', dataDir]);
  t.equal(result.status, 1);
  t.match(result.stderr, /^fleetplane: another server is running with this data directory/);
  t.equal(result.stderr.trim().split('\n').length, 1, 'one line, no stack');
});

t.test('a busy mesh port: one line naming the setting and the port, exit 1, no stack', async (t) => {
  const blocker = net.createServer();
  await new Promise<void>((resolve) => blocker.listen(0, '127.0.0.1', resolve));
  t.teardown(() => blocker.close());
  const { port: meshPort } = blocker.address() as net.AddressInfo;
  const result = run(['start', '--port', String(await freePort()), '--workers', '1', '--data-dir', tempDir()], {
    FLEETPLANE_MESH_SECRET: 'a-mesh-secret-of-some-length', FLEETPLANE_MESH_PORT: String(meshPort), FLEETPLANE_MESH_HOST: '127.0.0.1', FLEETPLANE_HTTP_HOST: '127.0.0.1',
  });
  t.equal(result.status, 1);
  t.equal(result.stderr, `fleetplane: mesh.port ${meshPort} on 127.0.0.1 is already in use\n`);
});

t.test('a start refused because the data directory is in use creates nothing there', async (t) => {
  // The running server keeps its store and its id elsewhere: the directory holds neither.
  const dataDir = tempDir();
  const first = await ServerProcess.start({ workers: 1, dataDir, server: { id: 'first' }, db: { path: path.join(tempDir(), 'elsewhere.db') } });
  t.teardown(() => first.stop());
  const before = readdirSync(dataDir).sort();
  t.notOk(before.includes('fleetplane.db') || before.includes('server-id'), `neither is there before: ${before.join(', ')}`);
  const result = run(['start', '--port', String(await freePort()), '--workers', '1', '--data-dir', dataDir]);
  t.equal(result.status, 1);
  t.match(result.stderr, /^fleetplane: another server is running with this data directory/);
  t.same(readdirSync(dataDir).sort(), before, 'no fleetplane.db, no server-id, nothing else');
});

t.test('fallback.redirect without a scheme is refused at start: it would send clients back to this node', async (t) => {
  const dataDir = path.join(tempDir(), 'data');
  for (const redirect of ['lb.example.com', '/elsewhere', 'ftp://lb.example.com']) {
    const result = run(['start', '--data-dir', dataDir], { FLEETPLANE_FALLBACK_REDIRECT: redirect });
    t.equal(result.status, 2, redirect);
    t.equal(result.stderr, `fleetplane: invalid configuration: environment variable FLEETPLANE_FALLBACK_REDIRECT: fallback.redirect: must be an absolute http:// or https:// URL, e.g. https://lb.example.com (got ${JSON.stringify(redirect)})\n`);
  }
  t.notOk(existsSync(dataDir), 'nothing was created');
});

t.test('an unknown FLEETPLANE_ variable is warned about once at start, with the setting it was probably meant for', async (t) => {
  const server = await ServerProcess.start({ workers: 0 }, { env: { FLEETPLANE_HTTP_PROT: '9000', FLEETPLANE_SECRETS_KEY: '', FLEETPLANE_NODE_CREDENTIAL: 'x', FLEETPLANE_INTERNAL_SOMETHING: '1' } });
  t.teardown(() => server.stop());
  const warnings = server.events.filter((event) => event.level === 40).map((event) => event.msg);
  t.same(warnings.filter((message) => /FLEETPLANE_/.test(String(message))), ['FLEETPLANE_HTTP_PROT: unknown setting (did you mean FLEETPLANE_HTTP_PORT?)'], 'that one only, once');
});

t.test('commands that work on a store never create one: keys list on a mistyped data directory is one line and exit 1', async (t) => {
  const missing = path.join(tempDir(), 'data-b');
  for (const args of [['keys', 'list'], ['keys', 'create', '--name', 'x'], ['keys', 'revoke', 'fpk_AAAAAAAAAAAAAAAA']]) {
    const result = run([...args, '--data-dir', missing]);
    t.equal(result.status, 1, args.join(' '));
    t.match(result.stderr, /^fleetplane: no store at .*data-b\/fleetplane\.db/);
    t.equal(result.stderr.trim().split('\n').length, 1);
  }
  t.notOk(existsSync(missing), 'nothing was created');
});

t.test('start serves, SIGTERM exits 0 with no process left; an invalid WEB_CONCURRENCY warns and falls back to auto', async (t) => {
  const port = await freePort();
  const dataDir = tempDir();
  const child = startCli(t, ['start', '--port', String(port), '--data-dir', dataDir], { WEB_CONCURRENCY: 'lots', FLEETPLANE_HTTP_HOST: '127.0.0.1' });
  let output = '';
  child.stdout!.on('data', (chunk) => (output += chunk));
  child.stderr!.on('data', (chunk) => (output += chunk));
  const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));

  // Until the server is ready or gone.
  let gone = false;
  void exited.then(() => (gone = true));
  const state = await until('the server to answer /readyz 200 or exit', async () => (gone ? 'gone' : await request(port, '/readyz').then((reply) => (reply.status === 200 ? 'ready' : undefined), () => undefined)), 30_000, { everyMs: 100 });
  t.equal(state, 'ready', `readyz 200 ${gone ? `(the server exited: ${output})` : ''}`);
  const health = await request(port, '/healthz');
  t.equal(health.status, 200);
  t.match(health.json(), { status: 'ready', worker: Number });
  t.match(output, /WEB_CONCURRENCY=\\"lots\\" is not a worker count/);
  const started = output.split('\n').map((line) => { try { return JSON.parse(line); } catch { return undefined; } }).find((line) => line?.msg === 'fleetplane started');
  t.equal(started?.workers, resolveWorkerCount('auto', {}).count, 'auto = the CPUs available to this process');
  process.kill(child.pid!, 'SIGTERM');
  t.equal(await exited, 0, 'exit 0 after SIGTERM');
  const left = spawnSync('pgrep', ['-g', String(child.pid)], { encoding: 'utf8' }).stdout.trim();
  t.equal(left, '', 'no process of the group is left');
  t.notOk(isAlive(child.pid!));
  const store = path.join(dataDir, 'fleetplane.db');
  t.equal(statSync(store).mode & 0o777, 0o600, "the store file is the owner's only");
  t.same([existsSync(`${store}-wal`), existsSync(`${store}-shm`)], [false, false], 'every process closed the store: its WAL is folded back');
});
