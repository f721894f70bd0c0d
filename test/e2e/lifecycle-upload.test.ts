import t, { type Test } from 'tap';
import path from 'node:path';
import { openStore } from '../../src/db/open.js';
import { bareRepository } from '../repositories/git-fixtures.js';
import { tempDir, type ServerProcess } from '../helpers/server-process.js';
import { cli, platformDataDir, spawnLifecycleServer } from './lifecycle-fixture.js';
import { until } from '../helpers/wait.js';
import { finishedJsonLines } from '../helpers/json-lines.js';

const UPLOAD = [process.execPath, path.resolve(import.meta.dirname, '..', 'repositories', 'fixtures', 'upload-command.mjs')];
/** The node credential the platform stored (SPEC 14.2): the upload command gets it, no log line shows it. */
const NODE_KEY = 'fpk_NodeCredentialE2E.not-for-any-log-line';
const OUTCOMES = ['initial upload completed', 'the initial upload is reserved by another node (or awaits reconciliation); not run here', 'the initial upload was completed by another node; not run here'];

interface Run {
  pid: number;
  credential: string | null;
}

/** One platform store with a cluster whose repository asks for an initial upload; servers share the store file. */
async function world(t: Test) {
  const root = tempDir('fleetplane-upload-e2e-');
  const bare = bareRepository(root, 'site');
  const { dataDir, organizationId } = platformDataDir();
  const dbPath = path.join(dataDir, 'fleetplane.db');
  const store = await openStore({ dataDir, db: { path: dbPath }, mongodb: { database: 'fleetplane' } });
  await store.collection('clusters').insertOne({
    _id: 'default', organization_id: organizationId, name: 'default',
    repositories: [{ url: bare, localFsRoot: 'checkouts', initialUpload: { enabled: true, completed: false } }],
  });
  await store.collection('servers_config').insertOne({ _id: 'key-1', organization_id: organizationId, name: 'node-key', type: 'key', admin: 1, key: NODE_KEY });
  t.teardown(() => store.close());
  const uploadLog = path.join(root, 'uploads.jsonl');
  const runs = () => finishedJsonLines<Run>(uploadLog);
  t.teardown(() => {
    for (const run of runs()) {
      try {
        process.kill(run.pid, 'SIGKILL');
      } catch {
        // finished
      }
    }
  });
  let servers = 0;
  const dataDirs = new Map<ServerProcess, string>();
  /** A server of its own id and data directory on the shared store file, its checkouts under its own root. */
  const start = (env: NodeJS.ProcessEnv = {}) => {
    servers += 1;
    const own = servers === 1 ? dataDir : tempDir('fleetplane-upload-node-');
    const server = spawnLifecycleServer(t, {
      dataDir: own, db: { path: dbPath }, workers: 1, server: { id: `node-${servers}`, organization: organizationId },
      repositories: { projectRoot: path.join(root, `node-${servers}`), uploadCommand: UPLOAD },
    }, { UPLOAD_LOG: uploadLog, ...env });
    dataDirs.set(server, own);
    return server;
  };
  const completed = async () => {
    const cluster = await store.collection('clusters').findOne({ _id: 'default' });
    return (cluster?.repositories as Array<{ initialUpload: { completed?: boolean } }>)[0]!.initialUpload.completed === true;
  };
  const reservations = () => store.collection('repository_upload_reservations').countDocuments({});
  /** `fleetplane ctl <method> --master` through the server's control socket, as JSON. */
  const ctl = <T>(server: ServerProcess, method: string, ...args: string[]) => JSON.parse(cli('ctl', method, '--master', '--json', '--data-dir', dataDirs.get(server)!, ...args)) as { replies: Array<{ result: T }> };
  return { start, runs, completed, reservations, ctl };
}

const outcome = (server: ServerProcess, from = 0) => server.waitFor((event) => OUTCOMES.includes(String(event.msg)), 30_000, from);

async function stopGracefully(server: ServerProcess): Promise<void> {
  server.signal('SIGTERM');
  await server.exit();
}

t.test('two servers sharing one store start together: the upload command runs exactly once', async (t) => {
  const w = await world(t);
  const [a, b] = [w.start(), w.start()];
  const outcomes = await Promise.all([outcome(a), outcome(b)]);
  t.equal(outcomes.filter((event) => event.msg === 'initial upload completed').length, 1, 'one server ran it');
  t.equal(w.runs().length, 1, 'the command ran once');
  t.ok(await w.completed());
  t.equal(await w.reservations(), 0);
  t.equal(w.runs()[0]?.credential, NODE_KEY, 'the command got the node credential through its environment');
  await Promise.all([stopGracefully(a), stopGracefully(b)]);
  for (const server of [a, b]) t.notOk([...server.events.map((event) => JSON.stringify(event)), ...server.stderr].some((line) => line.includes(NODE_KEY)), 'no log line holds the credential');
});

t.test('a command that exits 1 releases the reservation; the next start runs it', async (t) => {
  const w = await world(t);
  const failing = w.start({ UPLOAD_EXIT: '1' });
  await failing.waitFor((event) => event.msg === 'the initial upload failed; its reservation is released for a later start', 30_000);
  t.equal(await w.reservations(), 0);
  t.notOk(await w.completed());
  await stopGracefully(failing);
  const next = w.start();
  t.equal((await outcome(next)).msg, 'initial upload completed');
  t.equal(w.runs().length, 2);
  t.ok(await w.completed());
  await stopGracefully(next);
});

t.test('kill -9 during the command keeps the reservation: the next start does not run it until ctl clears it', async (t) => {
  const w = await world(t);
  const crashing = w.start({ UPLOAD_HANG: '1' });
  // The run is recorded in a file, not an event: poll the file until it appears.
  await until('the upload command to run', () => (w.runs().length > 0 ? true : undefined), 30_000, { everyMs: 50 });
  t.equal(w.runs().length, 1);
  await crashing.stop();
  process.kill(w.runs()[0]!.pid, 'SIGKILL');
  t.equal(await w.reservations(), 1, 'the crash left the reservation');

  const blocked = w.start();
  t.equal((await outcome(blocked)).msg, OUTCOMES[1]);
  t.equal(w.runs().length, 1, 'not run again');
  const listed = w.ctl<{ reservations: Array<{ server_id: string }> }>(blocked, 'repository.reservations');
  t.match(listed.replies[0]?.result.reservations, [{ server_id: 'node-1' }], 'ctl shows the crashed server\'s reservation');
  const cleared = w.ctl<{ cleared: number }>(blocked, 'repository.reservations.clear', '--value', '{"all":true}');
  t.equal(cleared.replies[0]?.result.cleared, 1);
  await stopGracefully(blocked);

  const after = w.start();
  t.equal((await outcome(after)).msg, 'initial upload completed');
  t.equal(w.runs().length, 2);
  await stopGracefully(after);
});
