import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import t, { type Test } from 'tap';
import { openStore } from '../../src/db/open.js';
import { SecretKeyring } from '../../src/secrets/keyring.js';
import { bareRepository } from '../repositories/git-fixtures.js';
import { tempDir, type ServerProcess } from '../helpers/server-process.js';
import { platformDataDir, spawnLifecycleServer } from './lifecycle-fixture.js';
import { until } from './manager-fixture.js';

// Three starts of a real server with a worker, each to its graceful end: slow on a busy machine.
t.setTimeout(420_000);

const UPLOAD = [process.execPath, path.resolve(import.meta.dirname, '..', 'repositories', 'fixtures', 'upload-command.mjs')];
const KEY = 'fpk_parentkeyE2E00001.the-secret-half-of-the-parents-key';
const SECRET_HALF = 'the-secret-half-of-the-parents-key';
const PARENT_ORG = 'org-parent';
const NO_KEY_LINE = 'this server names a manager but holds no usable key for it (manager.apiKey, in config or sealed in its inventory record): nothing is mirrored to the manager';

interface Envelope {
  authorization: string | undefined;
  collection?: string;
  filter?: Record<string, unknown>;
  update?: { $set?: Record<string, unknown> };
}

/** A parent's `/manager` that counts what reaches it and answers as a parent that wrote it would. */
async function countingParent(t: Test) {
  const received: Envelope[] = [];
  const server = http.createServer((request, response) => {
    let text = '';
    request.on('data', (chunk) => (text += chunk));
    request.on('end', () => {
      received.push({ authorization: request.headers.authorization, ...(JSON.parse(text) as Omit<Envelope, 'authorization'>) });
      response.writeHead(200, { 'content-type': 'application/json' }).end('{"matchedCount":1,"modifiedCount":1}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise((resolve) => server.close(resolve)));
  t.teardown(() => server.closeAllConnections());
  return { received, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` };
}

const completions = (received: Envelope[]) =>
  received.filter((envelope) => envelope.collection === 'clusters' && Object.entries(envelope.update?.$set ?? {}).some(([field, value]) => field.endsWith('.initialUpload.completed') && value === true));

async function stopGracefully(server: ServerProcess): Promise<number | null> {
  server.signal('SIGTERM');
  return server.exited;
}

const leaks = (server: ServerProcess) => [...server.events.map((event) => JSON.stringify(event)), ...server.stderr].filter((line) => line.includes(SECRET_HALF));

t.test("a managed node's initial upload reaches its parent once; its key survives in its record, sealed; without a usable key it says so once", async (t) => {
  const parent = await countingParent(t);
  const root = tempDir('fleetplane-managed-e2e-');
  const bare = bareRepository(root, 'site');
  const { dataDir, organizationId } = platformDataDir();
  const store = await openStore({ dataDir, db: { path: path.join(dataDir, 'fleetplane.db') }, mongodb: { database: 'fleetplane' } });
  t.teardown(() => store.close());
  await store.collection('clusters').insertOne({
    _id: 'default', organization_id: organizationId, name: 'default',
    repositories: [{ url: bare, localFsRoot: 'checkouts', initialUpload: { enabled: true, completed: false } }],
  });
  const start = (manager: Record<string, unknown> | undefined) =>
    spawnLifecycleServer(t, {
      dataDir, workers: 1, server: { id: 'node-1', organization: organizationId },
      repositories: { projectRoot: path.join(root, 'node-1'), uploadCommand: UPLOAD },
      ...(manager ? { manager } : {}),
    }, { UPLOAD_LOG: path.join(root, 'uploads.jsonl') });

  // 1. Managed through config: the upload completes, the parent hears of it once.
  const first = start({ organizationId: PARENT_ORG, host: parent.url, apiKey: KEY });
  await first.waitFor((event) => event.msg === 'initial upload completed', 90_000);
  const [completion] = await until('the completion at the parent', () => (completions(parent.received).length > 0 ? completions(parent.received) : undefined));
  t.same(completion, {
    authorization: `Bearer ${KEY}`,
    method: 'object.update',
    collection: 'clusters',
    filter: { _id: 'default', 'repositories.0.url': bare },
    update: { $set: { 'repositories.0.initialUpload.completed': true, 'repositories.0.initialUpload.completedAt': completion!.update!.$set!['repositories.0.initialUpload.completedAt'] } },
  }, 'one clusters update, of the entry at its position and URL, with the parent key');
  t.match(completion!.update!.$set!['repositories.0.initialUpload.completedAt'], /^\d{4}-\d\d-\d\dT/);
  // Readiness again (a rolling restart) does not publish again.
  const mark = first.events.length;
  first.signal('SIGHUP');
  await first.waitFor((event) => event.event === 'worker:ready', 60_000, mark);
  t.pass('the fleet was ready a second time');
  t.equal(await stopGracefully(first), 0);
  // The process is gone: nothing it could still send is on its way.
  t.equal(completions(parent.received).length, 1, 'exactly one clusters update with initialUpload.completed: true');

  const record = (await store.collection('servers').findOne({ _id: 'node-1' }))!;
  t.match(record, { organization_id: organizationId, manager: { organization_id: PARENT_ORG, host: parent.url, apiKey: /^fpsec:/ } }, 'the connection is in the record, the key sealed');
  t.notOk(JSON.stringify(record).includes(SECRET_HALF), 'no plain key in the store');
  t.same(leaks(first), [], 'no log line holds the key');

  // 2. No manager in config: the record's connection and key are hydrated, and saves are mirrored with that key.
  const sentBefore = parent.received.length;
  const second = start(undefined);
  await second.waitFor((event) => event.event === 'started', 60_000);
  const mirrored = await until("the second start's save at the parent", () => parent.received.slice(sentBefore).find((envelope) => envelope.collection === 'servers'));
  t.equal(mirrored.authorization, `Bearer ${KEY}`, 'the key came from the record');
  t.same(mirrored.filter, { _id: 'node-1' });
  t.equal(second.count((event) => event.msg === NO_KEY_LINE), 0, 'no warning: the key is usable');
  t.equal(await stopGracefully(second), 0);
  t.equal(completions(parent.received).length, 1, 'a completed upload is not mirrored again');
  t.same(leaks(second), []);

  // 3. The record names the manager, its key sealed with a key this server does not hold: one warning, nothing sent.
  const foreign = SecretKeyring.fromKeys([randomBytes(32)]).seal(KEY, { organizationId, collection: 'servers', path: ['manager', 'apiKey'] });
  await store.collection('servers').updateOne({ _id: 'node-1' }, { $set: { 'manager.apiKey': foreign } });
  const sentBeforeThird = parent.received.length;
  const third = start(undefined);
  await third.waitFor((event) => event.event === 'started', 60_000);
  await third.waitFor((event) => event.msg === NO_KEY_LINE, 30_000);
  t.equal(await stopGracefully(third), 0);
  t.equal(third.count((event) => event.msg === NO_KEY_LINE), 1, 'one warning at start');
  t.equal(parent.received.length, sentBeforeThird, 'nothing reached the parent');
  t.same(leaks(third), []);
});
