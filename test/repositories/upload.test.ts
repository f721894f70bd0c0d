import t, { type Test } from 'tap';
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { InitialUpload } from '../../src/repositories/upload.js';
import { parseRepositories } from '../../src/repositories/entries.js';
import { claimUpload, clearUploadReservations, listUploadReservations, reservationId } from '../../src/repositories/reservations.js';
import type { Store } from '../../src/db/types.js';
import { memoryLog, openTempStore, tempDir } from '../lifecycle/helpers.js';
import { until } from '../helpers/wait.js';
import { finishedJsonLines } from '../helpers/json-lines.js';

const ORG = 'org_platform';
const CLUSTER = 'blue';
const URL_A = 'https://git.example.com/owner/site.git';
const COMMAND = [process.execPath, path.join(import.meta.dirname, 'fixtures', 'upload-command.mjs'), '--target', 'primary'];
const CREDENTIAL = 'fpk_NodeCredential00.secret';

interface Run {
  cwd: string;
  args: string[];
  pid: number;
  credential: string | null;
}

async function world(t: Test, repositories: unknown[]) {
  const root = tempDir('fleetplane-upload-');
  const { store, dataDir } = await openTempStore();
  t.teardown(() => store.close());
  await store.collection('clusters').insertOne({ _id: CLUSTER, organization_id: ORG, name: 'blue', repositories });
  const uploadLog = path.join(root, 'runs.jsonl');
  const runs = () => finishedJsonLines<Run>(uploadLog);
  const project = path.join(root, 'project');
  const entries = () => {
    const parsed = parseRepositories(repositories, project).entries;
    for (const entry of parsed) mkdirSync(entry.checkout, { recursive: true });
    return parsed;
  };
  const uploader = (env: Record<string, string> = {}, options: { store?: Store; serverId?: string; mirror?: InitialUpload['deps']['mirror'] } = {}) => {
    const log = memoryLog();
    const upload = new InitialUpload({
      store: options.store ?? store, organizationId: ORG, clusterId: CLUSTER, serverId: options.serverId ?? 'srv-1', command: COMMAND, timeoutMs: 30_000,
      env: { ...process.env, UPLOAD_LOG: uploadLog, FLEETPLANE_NODE_CREDENTIAL: CREDENTIAL, ...env }, log, mirror: options.mirror,
    });
    return { upload, log };
  };
  const storedEntry = async (index = 0) => ((await store.collection('clusters').findOne({ _id: CLUSTER }))?.repositories as Array<Record<string, unknown>>)[index];
  return { root, store, dataDir, runs, entries, uploader, storedEntry };
}

t.test('two nodes sharing one store start together: the upload runs exactly once and is recorded', async (t) => {
  const w = await world(t, [{ url: URL_A, initialUpload: { enabled: true, completed: false } }]);
  const { store: second } = await openTempStore(w.dataDir);
  t.teardown(() => second.close());
  const mirrored: unknown[] = [];
  const a = w.uploader({}, { mirror: async (patch) => void mirrored.push(patch) });
  const b = w.uploader({}, { store: second, serverId: 'srv-2' });
  const entries = w.entries();
  const [outcomesA, outcomesB] = await Promise.all([a.upload.publish(entries), b.upload.publish(entries)]);
  const outcomes = [outcomesA.get(URL_A), outcomesB.get(URL_A)];
  t.equal(w.runs().length, 1, 'one run across both nodes');
  t.equal(outcomes.filter((outcome) => outcome === 'completed').length, 1, 'one node ran it');
  // The other found the reservation, or (had it been slower than the whole upload) the recorded completion.
  t.ok(outcomes.some((outcome) => outcome === 'reserved-elsewhere' || outcome === 'skipped'));
  const run = w.runs()[0]!;
  t.equal(run.cwd, entries[0]!.checkout, 'run in the checkout');
  t.same(run.args, ['--target', 'primary'], 'argv as configured, no shell');
  t.equal(run.credential, CREDENTIAL, 'the node credential reaches the command through its environment');
  t.match(await w.storedEntry(), { url: URL_A, initialUpload: { enabled: true, completed: true, completedAt: /^\d{4}-/ } });
  t.same(await listUploadReservations(w.store, ORG), [], 'a recorded completion frees the reservation');

  const again = w.uploader();
  await again.upload.publish(w.entries());
  t.equal(w.runs().length, 1, 'a stale in-memory entry does not run a completed upload again');
});

t.test('publish is memoized: repeated readiness shares one run', async (t) => {
  const w = await world(t, [{ url: URL_A, initialUpload: { enabled: true } }]);
  const { upload } = w.uploader();
  const entries = w.entries();
  const first = upload.publish(entries);
  t.equal(upload.publish(entries), first);
  await first;
  t.equal(w.runs().length, 1);
});

t.test('a command that exits 1 releases its reservation; a later start runs it again', async (t) => {
  const w = await world(t, [{ url: URL_A, initialUpload: { enabled: true } }]);
  const failing = w.uploader({ UPLOAD_EXIT: '1' });
  t.equal((await failing.upload.publish(w.entries())).get(URL_A), 'failed');
  t.same(await listUploadReservations(w.store, ORG), []);
  t.same((await w.storedEntry())?.initialUpload, { enabled: true }, 'completion stays pending');
  t.match(failing.log.lines, [{ level: 'warn', details: { exitCode: 1 }, message: /failed; its reservation is released/ }]);

  const later = w.uploader();
  t.equal((await later.upload.publish(w.entries())).get(URL_A), 'completed');
  t.equal(w.runs().length, 2);
});

t.test('a reservation left by a crash keeps the upload from running until an operator clears it', async (t) => {
  const w = await world(t, [{ url: URL_A, initialUpload: { enabled: true } }]);
  t.ok(await claimUpload(w.store, { organizationId: ORG, clusterId: CLUSTER, url: URL_A }, 'srv-crashed', new Date('2026-01-01T00:00:00Z')));
  const blocked = w.uploader();
  t.equal((await blocked.upload.publish(w.entries())).get(URL_A), 'reserved-elsewhere');
  t.equal(w.runs().length, 0);
  t.match(await listUploadReservations(w.store, ORG, CLUSTER), [{ _id: reservationId({ organizationId: ORG, clusterId: CLUSTER, url: URL_A }), cluster_id: CLUSTER, url: URL_A, server_id: 'srv-crashed' }]);
  t.equal(await clearUploadReservations(w.store, ORG, CLUSTER, URL_A), 1);
  t.equal((await w.uploader().upload.publish(w.entries())).get(URL_A), 'completed');
  t.equal(w.runs().length, 1);
});

t.test('an upload that succeeds but cannot be recorded keeps its reservation for reconciliation', async (t) => {
  const w = await world(t, [{ url: URL_A, initialUpload: { enabled: true } }]);
  const { upload, log } = w.uploader();
  const entries = w.entries();
  await w.store.collection('clusters').updateOne({ _id: CLUSTER }, { $set: { repositories: [] } });
  t.equal((await upload.publish(entries)).get(URL_A), 'uncertain');
  t.equal((await listUploadReservations(w.store, ORG)).length, 1);
  t.match(log.lines, [{ level: 'error', message: /completion could not be recorded; the reservation is kept/ }]);
});

t.test('shutdown aborts an upload in flight within its budget and releases the reservation', async (t) => {
  const w = await world(t, [{ url: URL_A, initialUpload: { enabled: true } }]);
  const { upload } = w.uploader({ UPLOAD_HANG: '1' });
  const running = upload.publish(w.entries());
  await until('the upload command to run', () => (w.runs().length > 0 ? true : undefined));
  await upload.abort(5_000);
  t.equal((await running).get(URL_A), 'failed');
  t.same(await listUploadReservations(w.store, ORG), []);
  t.throws(() => process.kill(w.runs()[0]!.pid, 0), { code: 'ESRCH' }, 'the command is gone');
});

t.test('disabled, completed and not-requested entries are skipped; no command configured is a warning', async (t) => {
  const w = await world(t, [
    { url: 'https://h/a/one.git', initialUpload: { enabled: true, completed: true } },
    { url: 'https://h/a/two.git', initialUpload: { enabled: false } },
    { url: 'https://h/a/three.git', enabled: false, initialUpload: { enabled: true } },
    { url: 'https://h/a/four.git' },
  ]);
  t.equal((await w.uploader().upload.publish(w.entries())).size, 0);
  t.equal(w.runs().length, 0);
  const log = memoryLog();
  const unconfigured = new InitialUpload({ store: w.store, organizationId: ORG, clusterId: CLUSTER, serverId: 's', command: undefined, timeoutMs: 1000, env: {}, log });
  const pending = parseRepositories([{ url: URL_A, initialUpload: { enabled: true } }], w.root).entries;
  t.equal((await unconfigured.publish(pending)).get(URL_A), 'skipped');
  t.match(log.lines, [{ level: 'warn', message: /uploadCommand is not configured/ }]);
});
