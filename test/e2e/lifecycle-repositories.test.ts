import t from 'tap';
import { spawnSync } from 'node:child_process';
import { existsSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { openStore } from '../../src/db/open.js';
import { bareRepository, commitUpstream, gitSync } from '../repositories/git-fixtures.js';
import { CLI, FAST, cleanEnv, startCli, tempDir } from '../helpers/server-process.js';
import { scaled, until } from '../helpers/wait.js';
import { platformDataDir, spawnLifecycleServer } from './lifecycle-fixture.js';

t.test('a server clones at start, checkpoints at SIGTERM, and on restart reuses the checkout without pulling', async (t) => {
  const root = tempDir('fleetplane-repos-e2e-');
  const bare = bareRepository(root, 'site');
  const { dataDir, organizationId } = platformDataDir();
  const store = await openStore({ dataDir, db: {}, mongodb: { database: 'fleetplane' } });
  await store.collection('clusters').insertOne({ _id: 'default', organization_id: organizationId, name: 'default', repositories: [{ url: bare, localFsRoot: 'work' }] });
  await store.close();
  const config = { dataDir, workers: 1, server: { id: 'node-r' }, repositories: { projectRoot: root } };
  const checkout = path.join(root, 'work', 'site');

  const first = spawnLifecycleServer(t, config);
  await first.waitFor((event) => event.msg === 'repository cloned', 30_000);
  t.same((await first.waitFor((event) => event.event === 'started', 30_000)).repositories, [checkout], 'server.repository lists the checkout');
  await first.waitFor((event) => event.event === 'worker:ready', 30_000);
  writeFileSync(path.join(checkout, 'page.html'), '<p>edited on the node</p>\n');
  first.signal('SIGTERM');
  t.equal(await first.exit(), 0);
  t.equal(gitSync(bare, 'show', 'main:page.html'), '<p>edited on the node</p>', 'the shutdown checkpoint reached the remote');
  t.equal(gitSync(bare, 'log', '-1', '--format=%s', 'main'), 'Checkpoint of node-r at shutdown (SIGTERM)');

  const local = gitSync(checkout, 'rev-parse', 'HEAD');
  commitUpstream(root, bare, 'main', 'upstream.txt');
  const second = spawnLifecycleServer(t, config);
  await second.waitFor((event) => event.msg === 'repository checkout reused', 30_000);
  t.equal(gitSync(checkout, 'rev-parse', 'HEAD'), local, 'no pull at restart');
  second.signal('SIGTERM');
  t.equal(await second.exit(), 0);
});

t.test("the first start's own organization is the platform's: the repository methods answer for it without a restart", async (t) => {
  // An empty data directory, as `npm start` finds it: the start creates organization "default" once it serves.
  const dataDir = tempDir('fleetplane-repos-first-');
  const file = path.join(dataDir, 'fleetplane.config.json');
  writeFileSync(file, JSON.stringify({ ...FAST, dataDir, workers: 1, http: { port: 0, host: '127.0.0.1' }, mesh: { enabled: false } }));
  const child = startCli(t, ['start', '--config', file]);
  const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
  await until('the first start to create its organization and admin key', () => (existsSync(path.join(dataDir, 'admin.key')) ? true : undefined), 30_000, { everyMs: 100 });
  const ctl = (method: string, ...args: string[]) => {
    const result = spawnSync(process.execPath, [CLI, 'ctl', method, '--master', '--data-dir', dataDir, '--json', ...args], { encoding: 'utf8', env: cleanEnv(), timeout: scaled(30_000) });
    return { status: result.status, output: `${result.stdout}${result.stderr}` };
  };
  let last: ReturnType<typeof ctl> | undefined;
  await until('repository.reservations to answer for the platform organization', () => ((last = ctl('repository.reservations')).status === 0 ? true : undefined), 15_000, { everyMs: 250, last: () => last });
  t.match(JSON.parse(last!.output), { replies: [{ worker: 0, ok: true, result: { reservations: [] } }] }, 'listed, not disabled');
  const cleared = ctl('repository.reservations.clear', '--value', '{"all":true}');
  t.equal(cleared.status, 0, cleared.output);
  t.match(JSON.parse(cleared.output), { replies: [{ ok: true, result: { cleared: 0 } }] });
  process.kill(child.pid!, 'SIGTERM');
  t.equal(await exited, 0);
});
