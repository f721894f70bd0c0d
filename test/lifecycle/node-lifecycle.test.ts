import t from 'tap';
import { existsSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { loadConfig } from '../../src/config/load.js';
import { NodeLifecycle } from '../../src/lifecycle/node-lifecycle.js';
import { NODE_CREDENTIAL_ENV } from '../../src/lifecycle/node-credential.js';
import { REPOSITORY_ORGANIZATION_ENV, REPOSITORY_ROOT_ENV } from '../../src/repositories/service.js';
import { HandlerRegistry } from '../../src/ipc/handlers.js';
import { registerReservationControl } from '../../src/repositories/control.js';
import { claimUpload } from '../../src/repositories/reservations.js';
import { isServerMethod } from '../../src/auth/authority.js';
import { GIT_ENV, bareRepository, gitSync } from '../repositories/git-fixtures.js';
import { memoryLog, openTempStore, tempDir } from './helpers.js';

const ORG = 'org_platform';
const CREDENTIAL = 'fpk_NodeCredential00.the-secret-part';
const UPLOAD = [process.execPath, path.join(import.meta.dirname, '..', 'repositories', 'fixtures', 'upload-command.mjs')];

t.test('boot to stop: identity, credential and checkout before workers, registration and upload at readiness, removal then checkpoint', async (t) => {
  const root = tempDir('fleetplane-node-');
  const bare = bareRepository(root, 'site');
  const { store } = await openTempStore();
  t.teardown(() => store.close());
  await store.collection('clusters').insertOne({ _id: 'blue', organization_id: ORG, name: 'blue', repositories: [{ url: bare, initialUpload: { enabled: true } }] });
  await store.collection('servers_config').insertOne({ _id: 'k1', organization_id: ORG, name: 'node', type: 'key', admin: 'true', key: CREDENTIAL });
  const config = loadConfig({ env: {}, object: { dataDir: path.join(root, 'data'), node: { host: 'node-1.example.com', privateIp: '10.0.0.1' }, repositories: { uploadCommand: UPLOAD } } }).config;
  const log = memoryLog();
  const calls: string[] = [];
  const saved: unknown[] = [];
  const lifecycle = new NodeLifecycle({
    config, store, organizationId: ORG, serverId: 'srv-1', clusterId: 'blue', log, cwd: path.join(root, 'project'),
    env: { ...GIT_ENV, UPLOAD_LOG: path.join(root, 'uploads.jsonl') },
    workflows: { run: async (name, input) => (calls.push(`workflow ${name} ${JSON.stringify(input)}`), { remove: { api: 'edge', endpoint: 'remove', method: 'post', data: { id: 'r-1' } } }) },
    api: { send: async (envelope) => void calls.push(`send ${JSON.stringify(envelope)}`) },
    saveIdentity: async (identity) => void saved.push(identity),
  });

  const inherited = await lifecycle.start();
  const checkout = path.join(root, 'site');
  t.same(inherited, { [NODE_CREDENTIAL_ENV]: CREDENTIAL, [REPOSITORY_ROOT_ENV]: checkout, [REPOSITORY_ORGANIZATION_ENV]: ORG });
  t.match(saved, [{ host: 'node-1.example.com', ip: { private: '10.0.0.1' } }]);
  t.ok(existsSync(path.join(checkout, 'README.md')), 'cloned before workers fork');

  await Promise.all([lifecycle.ready(), lifecycle.ready()]);
  t.equal(calls.length, 1);
  t.match(calls[0], /^workflow configure-cluster-routing \{"server_id":"srv-1","cluster_id":"blue","ip":\{"private":"10.0.0.1"\},"host":"node-1.example.com"/);
  t.match(((await store.collection('clusters').findOne({ _id: 'blue' }))?.repositories as unknown[])[0], { initialUpload: { completed: true } });

  writeFileSync(path.join(checkout, 'notes.md'), 'written by the node\n');
  await lifecycle.withdraw('SIGTERM');
  await lifecycle.checkpoint('SIGTERM', 30_000);
  t.same(calls.slice(1), [`send ${JSON.stringify({ organization_id: ORG, host: 'node-1.example.com', api: 'edge', endpoint: 'remove', method: 'post', data: { id: 'r-1', reason: 'SIGTERM' } })}`]);
  t.equal(gitSync(bare, 'show', 'main:notes.md'), 'written by the node');
  t.notMatch(log.text(), CREDENTIAL, 'the credential is in no log line');
});

t.test('without a platform organization only the identity is resolved', async (t) => {
  const { store } = await openTempStore();
  t.teardown(() => store.close());
  const config = loadConfig({ env: {}, object: { node: { host: 'h' } } }).config;
  const calls: string[] = [];
  const lifecycle = new NodeLifecycle({
    config, store, organizationId: undefined, serverId: 's', clusterId: 'c', log: memoryLog(),
    workflows: { run: async () => void calls.push('workflow') }, api: { send: async () => void calls.push('send') },
  });
  t.same(await lifecycle.start(), {});
  await lifecycle.ready();
  await lifecycle.withdraw('SIGINT');
  await lifecycle.checkpoint('SIGINT', 1000);
  t.same(calls, []);
  t.equal(lifecycle.identity?.host, 'h');
});

t.test('ctl lists and clears upload reservations; both are platform-only server methods', async (t) => {
  const { store } = await openTempStore();
  t.teardown(() => store.close());
  const handlers = new HandlerRegistry();
  // The platform organization comes with the store's first organization: a first start creates it once serving.
  let platform: string | null = null;
  registerReservationControl((method, handler) => handlers.handle(method, handler), { store, platformOrganization: async () => platform, clusterId: 'blue' });
  const url = 'https://git.example.com/o/site.git';
  const call = (method: string, data?: unknown) => handlers.run({ method, data } as never);
  t.match(await call('repository.reservations'), { ok: false, error: { code: 'unavailable', message: /no platform organization yet/ } }, 'before it exists');
  platform = ORG;
  await claimUpload(store, { organizationId: ORG, clusterId: 'blue', url }, 'srv-crashed', new Date());
  await claimUpload(store, { organizationId: ORG, clusterId: 'green', url }, 'srv-other', new Date());
  t.match(await call('repository.reservations'), { ok: true, result: { reservations: [{ cluster_id: 'blue', url, server_id: 'srv-crashed' }] } });
  t.match(await call('repository.reservations.clear', {}), { ok: false, error: { code: 'bad_request' } });
  t.same(await call('repository.reservations.clear', { url }), { ok: true, result: { cleared: 1 } });
  t.same(await call('repository.reservations'), { ok: true, result: { reservations: [] } });
  t.equal(await store.collection('repository_upload_reservations').countDocuments({ cluster_id: 'green' }), 1, 'another cluster is untouched');
  t.ok(isServerMethod('repository.reservations') && isServerMethod('repository.reservations.clear'));
});
