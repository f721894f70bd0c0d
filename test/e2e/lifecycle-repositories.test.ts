import t from 'tap';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { openStore } from '../../src/db/open.js';
import { bareRepository, commitUpstream, gitSync } from '../repositories/git-fixtures.js';
import { tempDir } from '../helpers/server-process.js';
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
