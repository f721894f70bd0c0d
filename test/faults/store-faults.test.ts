import { spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import { chmodSync, closeSync, existsSync, openSync, rmSync, statSync, unlinkSync, writeSync } from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { createInterface } from 'node:readline';
import Database from 'better-sqlite3';
import t from 'tap';
import { createKey } from '../../src/auth/keys.js';
import { createOrganization } from '../../src/auth/organizations.js';
import { EmbeddedStore } from '../../src/db/embedded/store.js';
import { ensureStandardIndexes } from '../../src/db/open.js';
import { FAST, FIXTURE, ServerProcess, cleanEnv, tempDir } from '../helpers/server-process.js';
import { killOnExit, run, tryRun, undoOnExit } from './cleanup.js';

// The store's faults under a running server: another process holding SQLite's write lock, the disk under the
// data directory filling up, the store file made unreadable. Each time: bounded waits, 503 for the writes that
// cannot be made (and nothing half-written), reads and probes served, no crash loop, and recovery after.

const NOBODY = 65_534;
/** The first directory above the server's code that an unprivileged user cannot enter (a checkout in a 0700 directory). */
function closedAncestor(from: string): string | undefined {
  for (let dir = path.dirname(from); ; dir = path.dirname(dir)) {
    if ((statSync(dir).mode & 0o001) === 0) return dir;
    if (path.dirname(dir) === dir) return undefined;
  }
}
const closed = closedAncestor(FIXTURE);
const why = process.getuid?.() !== 0
  ? 'needs root: it mounts a small tmpfs and runs the server as an unprivileged user'
  : closed
    ? `runs the server as an unprivileged user, who cannot enter ${closed} (no execute permission for others)`
    : undefined;
if (why) t.plan(0, why);

interface Answer {
  kind: 'write' | 'read' | 'probe';
  name?: string;
  startedAt: number;
  endedAt: number;
  status: number;
  code?: string;
}

const answers: Answer[] = [];
let server: ServerProcess;
let mount: string;
let dbFile: string;
let adminKey: string;
let writes = 0;
/** Bytes of padding per written document; larger while the disk is full, to run through SQLite's write-ahead log. */
let padBytes = 2_000;

function call(kind: Answer['kind'], body?: unknown, name?: string): Promise<void> {
  const startedAt = Date.now();
  const text = body === undefined ? undefined : JSON.stringify(body);
  const headers: http.OutgoingHttpHeaders = { host: 'localhost' };
  if (text !== undefined) Object.assign(headers, { authorization: `Bearer ${adminKey}`, 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  return new Promise((resolve) => {
    const done = (status: number, code?: string) => {
      answers.push({ kind, name, startedAt, endedAt: Date.now(), status, code });
      resolve();
    };
    const request = http.request({ host: '127.0.0.1', port: server.port, path: text === undefined ? '/healthz' : '/crud', method: text === undefined ? 'GET' : 'POST', headers, agent: false, timeout: 60_000 }, (response) => {
      let data = '';
      response.setEncoding('utf8');
      response.on('data', (chunk) => (data += chunk));
      response.on('end', () => {
        let code: string | undefined;
        try {
          code = (JSON.parse(data) as { error?: { code?: string } }).error?.code;
        } catch {
          code = 'unparsable';
        }
        done(response.statusCode!, code);
      });
    });
    request.on('timeout', () => request.destroy(new Error('no answer in 60 s')));
    request.on('error', (error) => done(0, error.message));
    request.end(text);
  });
}

/** The reasons the workers logged for their 503s since event `from` (what an operator reads). */
const reasons = (from: number) => [...new Set(server.events.slice(from).filter((event) => event.msg === 'the data store is unavailable').map((event) => String((event.err as { message?: string })?.message)))];
const during = (from: number, to: number) => answers.filter((answer) => answer.startedAt >= from && answer.startedAt < to);
const summary = (list: Answer[]) => {
  const by = (kind: Answer['kind']) => list.filter((answer) => answer.kind === kind);
  const count = (items: Answer[], status: number) => items.filter((answer) => answer.status === status).length;
  return {
    writes: by('write').length,
    writesOk: count(by('write'), 200),
    writes503: count(by('write'), 503),
    reads: by('read').length,
    readsOk: count(by('read'), 200),
    probes: by('probe').length,
    probesOk: count(by('probe'), 200),
    other: list.filter((answer) => answer.status !== 200 && !(answer.kind === 'write' && answer.status === 503)).map((answer) => `${answer.kind} ${answer.status} ${answer.code ?? ''}`),
  };
};
let issued = 0;
/** Waits until every request issued has its answer (each gives up after 60 s). */
const settle = async () => {
  const deadline = Date.now() + 90_000;
  while (answers.length < issued && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 50));
};
const until = async (check: () => boolean, timeoutMs: number) => {
  const deadline = Date.now() + timeoutMs;
  while (!check() && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 50));
  return check();
};

if (!why) {
  t.before(async () => {
    const base = tempDir('fleetplane-faults-store-');
    // The unprivileged server must reach its data directory.
    chmodSync(base, 0o755);
    mount = path.join(base, 'data');
    run('mkdir', ['-p', mount]);
    run('mount', ['-t', 'tmpfs', '-o', 'size=32m,mode=0755', `fleetplane-faults-${process.pid}`, mount]);
    undoOnExit(() => tryRun('umount', ['-l', mount]));
    dbFile = path.join(mount, 'fleetplane.db');
    const store = await EmbeddedStore.open(dbFile);
    await ensureStandardIndexes(store);
    const organization = await createOrganization(store, { name: 'acme', hosts: ['localhost'] });
    adminKey = (await createKey(store, { organizationId: organization._id, name: 'admin', admin: true })).key;
    await store.close();
    run('chown', ['-R', `${NOBODY}:${NOBODY}`, mount]);
    const config = { ...FAST, dataDir: mount, http: { port: 0, host: '127.0.0.1' }, workers: { count: 2, readyTimeoutMs: 120_000 }, restart: { ...FAST.restart, bootFailQuarantine: 3 } };
    const child = spawn(process.execPath, [FIXTURE], {
      detached: true,
      uid: NOBODY,
      gid: NOBODY,
      cwd: mount,
      stdio: ['pipe', 'pipe', 'pipe'],
      env: { ...cleanEnv(), FIXTURE_CONFIG: JSON.stringify(config), HOME: mount },
    });
    killOnExit(child.pid);
    server = new ServerProcess(child);
    server.port = (await server.waitFor((event) => event.event === 'started', 60_000)).port as number;
    await server.readyWorkers(2, 0, 240_000);
  });
  t.teardown(async () => {
    await server?.stop();
    tryRun('umount', ['-l', mount]);
  });
}

/** Writes (one document each, named), reads and probes, each on its own timer, until stopped. */
function load(): () => void {
  const issue = (...args: Parameters<typeof call>) => {
    issued++;
    void call(...args);
  };
  const timers = [
    setInterval(() => {
      const name = `w-${++writes}`;
      issue('write', { method: 'object.create', collection: 'faults', documents: [{ name, pad: 'x'.repeat(padBytes) }] }, name);
    }, 40),
    setInterval(() => issue('read', { method: 'object.read', collection: 'faults', filter: { name: 'w-1' } }), 60),
    setInterval(() => issue('probe'), 100),
  ];
  return () => timers.forEach(clearInterval);
}

t.test('another process holds the write lock for 10 s: writes wait a bounded time and answer 503, reads and probes are served', async (t) => {
  const mark = server.events.length;
  const stop = load();
  await new Promise((resolve) => setTimeout(resolve, 1_000));
  // The holder: BEGIN IMMEDIATE takes SQLite's write lock, kept for 10 s.
  const holder = spawn(process.execPath, ['-e', `
    const Database = require(${JSON.stringify(createRequire(import.meta.url).resolve('better-sqlite3'))});
    const db = new Database(${JSON.stringify(dbFile)});
    db.exec('BEGIN IMMEDIATE');
    console.log('locked');
    setTimeout(() => { db.exec('ROLLBACK'); db.close(); console.log('released'); }, 10_000);
  `], { stdio: ['ignore', 'pipe', 'inherit'] });
  t.teardown(() => void holder.kill('SIGKILL'));
  const lines = createInterface({ input: holder.stdout! });
  const locked = await new Promise<number>((resolve) => lines.once('line', () => resolve(Date.now())));
  const released = await new Promise<number>((resolve) => lines.once('line', () => resolve(Date.now())));
  await new Promise((resolve) => setTimeout(resolve, 4_000));
  stop();
  await settle();

  const held = summary(during(locked, released));
  const after = summary(during(released + 1_000, Date.now()));
  t.comment(`lock held ${released - locked} ms: ${JSON.stringify(held)}; after release: ${JSON.stringify(after)}; logged: ${JSON.stringify(reasons(mark))}`);
  t.ok(reasons(mark).some((reason) => reason.includes('locked by another process')), 'the log says the store stayed locked');
  t.same(held.other, [], 'while locked, every answer is a 200 or, for a write, a 503');
  t.ok(held.writes503 > 0, 'writes that could not get the lock answered 503');
  t.ok(during(locked, released).filter((answer) => answer.kind === 'write' && answer.status === 503).every((answer) => answer.code === 'store_unavailable'), 'as store_unavailable');
  t.equal(held.readsOk, held.reads, 'every read was served');
  t.equal(held.probesOk, held.probes, 'every probe was served');
  t.ok(held.writes > 0 && held.reads > 0 && held.probes > 0);
  const longest = Math.max(...during(locked, released).filter((answer) => answer.kind === 'write').map((answer) => answer.endedAt - answer.startedAt));
  t.ok(longest < released - locked, `no write waited for the whole lock (longest ${longest} ms)`);
  t.same(after.other, [], 'after the release');
  t.equal(after.writesOk, after.writes, 'writes succeed again');
  t.equal(server.count((event) => event.event === 'worker:crash'), 0, 'no worker crashed');
});

t.test('the disk under the data directory fills up: writes answer 503 with nothing half-written, reads are served, and writes resume once space is freed', async (t) => {
  const mark = server.events.length;
  const stop = load();
  await new Promise((resolve) => setTimeout(resolve, 1_000));
  const filler = path.join(mount, 'filler');
  const fd = openSync(filler, 'w');
  const chunk = Buffer.alloc(64 * 1024, 1);
  try {
    for (;;) writeSync(fd, chunk);
  } catch (error) {
    t.equal((error as NodeJS.ErrnoException).code, 'ENOSPC', 'the filesystem is full');
  } finally {
    closeSync(fd);
  }
  const full = Date.now();
  // Writes first fill the space SQLite already holds (its write-ahead log is reused after each checkpoint): they
  // are refused once they need more. Larger documents get there sooner.
  padBytes = 16_000;
  const refused = await until(() => answers.some((answer) => answer.kind === 'write' && answer.status === 503 && answer.startedAt >= full), 60_000);
  await new Promise((resolve) => setTimeout(resolve, 3_000));
  padBytes = 2_000;
  unlinkSync(filler);
  const freed = Date.now();
  await new Promise((resolve) => setTimeout(resolve, 4_000));
  stop();
  await settle();

  t.ok(refused, 'writes were refused once the space SQLite held was used up');
  // A write already past SQLite when the disk filled may still have been made: judge from a second in.
  const whileFull = summary(during(full + 1_000, freed));
  const after = summary(during(freed + 1_000, Date.now()));
  t.comment(`disk full ${freed - full} ms: ${JSON.stringify(whileFull)}; after freeing: ${JSON.stringify(after)}; logged: ${JSON.stringify(reasons(mark))}`);
  t.ok(reasons(mark).some((reason) => reason.includes('is full')), 'the log says the disk is full');
  t.same(whileFull.other, [], 'while full, every answer is a 200 or, for a write, a 503');
  t.ok(whileFull.writes503 > 0, 'writes answered 503');
  t.equal(whileFull.readsOk, whileFull.reads, 'every read was served');
  t.equal(whileFull.probesOk, whileFull.probes, 'every probe was served');
  t.same(after.other, [], 'after freeing');
  t.ok(after.writes > 0 && after.writesOk === after.writes, 'writes succeed again');
  t.equal(server.count((event) => event.event === 'worker:crash'), 0, 'no worker crashed');
});

t.test('every acknowledged write is in the store, no refused one is, and the file is intact', async (t) => {
  const db = new Database(dbFile, { readonly: true, fileMustExist: true });
  t.teardown(() => db.close());
  t.equal(db.pragma('integrity_check', { simple: true }), 'ok', 'PRAGMA integrity_check');
  const stored = new Set(db.prepare<[], string>("SELECT json_extract(doc, '$.name') FROM documents WHERE collection LIKE '%faults'").pluck().all());
  const written = answers.filter((answer) => answer.kind === 'write');
  const lost = written.filter((answer) => answer.status === 200 && !stored.has(answer.name!));
  const halfWritten = written.filter((answer) => answer.status === 503 && stored.has(answer.name!));
  t.comment(`${answers.length} requests answered; ${written.length} writes: ${written.filter((answer) => answer.status === 200).length} acknowledged, ${written.filter((answer) => answer.status === 503).length} refused with 503; writes lost: ${lost.length}; refused but stored: ${halfWritten.length}`);
  t.same(lost.map((answer) => answer.name), [], 'writes lost: 0');
  t.same(halfWritten.map((answer) => answer.name), [], 'no refused write was made');
});

t.test('the store file made unreadable: running workers keep serving, a new one fails with a clear error and its slot is quarantined, not looped', async (t) => {
  const mark = server.events.length;
  chmodSync(dbFile, 0o000);
  const chmodAt = Date.now();
  const restore = undoOnExit(() => chmodSync(dbFile, 0o600));
  const stop = load();
  await new Promise((resolve) => setTimeout(resolve, 1_000));
  const fleet = await server.command<{ workers: Array<{ worker: number; pid: number }> }>('fleet');
  const victim = fleet.workers.find((worker) => worker.worker === 1)!;
  const killedAt = Date.now();
  process.kill(victim.pid, 'SIGKILL');
  await server.waitFor((event) => event.event === 'worker:quarantined', 90_000, mark);
  await new Promise((resolve) => setTimeout(resolve, 2_000));
  stop();
  await settle();
  // Requests already inside the killed worker die with it (no answer); only those are left out.
  const unreadable = summary(during(chmodAt, Date.now()).filter((answer) => !(answer.status === 0 && answer.startedAt <= killedAt)));
  t.comment(`unreadable store: ${JSON.stringify(unreadable)}; logged: ${JSON.stringify(reasons(mark))}`);
  const since = server.events.slice(mark);
  const boots = since.filter((event) => event.msg === 'worker crashed' && event.bootFailure === true);
  t.equal(boots.length, 3, 'three boot failures, then the slot is quarantined (restart.bootFailQuarantine)');
  t.ok(existsSync(dbFile));
  t.ok(server.stderr.concat(since.map((event) => JSON.stringify(event))).some((line) => line.includes(`cannot open the embedded store at ${dbFile}`) && /EACCES|permission denied/.test(line)), 'the log names the file and the reason');
  t.equal(since.filter((event) => event.event === 'worker:restart').length, 3, 'no further restart after the quarantine');
  t.same(unreadable.other.filter((line) => !line.startsWith('write 503')), [], 'the other worker kept serving');
  t.equal(server.exitCode, undefined, 'the primary is still running');

  restore();
  const back = server.events.length;
  server.signal('SIGHUP');
  const cameBack = await until(() => server.count((event) => event.event === 'worker:ready' && server.events.indexOf(event) >= back) >= 2, 90_000);
  t.ok(cameBack, 'after the fix, a rolling restart brings the slot back');
  rmSync(path.join(mount, 'filler'), { force: true });
});
