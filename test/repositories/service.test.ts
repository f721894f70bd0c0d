import t, { type Test } from 'tap';
import { existsSync, readFileSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { RepositoryService, REPOSITORY_ORGANIZATION_ENV, REPOSITORY_ROOT_ENV } from '../../src/repositories/service.js';
import { systemGit, type GitRunner } from '../../src/repositories/git.js';
import { compileProvider } from '../../src/api/provider.js';
import { memoryLog, openTempStore, tempDir } from '../lifecycle/helpers.js';
import { until } from '../helpers/wait.js';
import { GIT_ENV, bareRepository, commitUpstream, gitSync, hangPushes, smartHttpServer } from './git-fixtures.js';

const ORG = 'org_platform';
const CLUSTER = 'blue';

async function setup(t: Test, repositories: unknown[], extra: { root?: string } = {}) {
  const root = extra.root ?? tempDir('fleetplane-repos-');
  const { store } = await openTempStore();
  t.teardown(() => store.close());
  await store.collection('clusters').insertOne({ _id: CLUSTER, organization_id: ORG, name: 'blue', repositories });
  const log = memoryLog();
  const argv: string[][] = [];
  const git: GitRunner = (args, options) => (argv.push([...args]), systemGit(args, options));
  const make = () => new RepositoryService({
    store, organizationId: ORG, clusterId: CLUSTER, serverId: 'srv-1', projectRoot: path.join(root, 'project'),
    stateDir: path.join(root, 'state'), log, git, baseEnv: GIT_ENV,
  });
  return { root, store, log, argv, make, service: make() };
}

t.test('a missing checkout is cloned; a restart reuses it without pulling or resetting', async (t) => {
  const root = tempDir('fleetplane-repos-');
  const bare = bareRepository(root, 'site');
  const { service, make, log, argv } = await setup(t, [{ url: bare }], { root });
  await service.prepare();
  const checkout = path.join(root, 'site');
  t.equal(service.repositories[0]?.prepared, 'cloned');
  t.equal(gitSync(checkout, 'branch', '--show-current'), 'main');
  t.same(service.workerEnvironment(), { [REPOSITORY_ROOT_ENV]: checkout, [REPOSITORY_ORGANIZATION_ENV]: ORG });

  const before = gitSync(checkout, 'rev-parse', 'HEAD');
  const upstream = commitUpstream(root, bare, 'main', 'news.txt');
  writeFileSync(path.join(checkout, 'local.txt'), 'work in progress\n');
  argv.length = 0;
  const restarted = make();
  await restarted.prepare();
  t.equal(restarted.repositories[0]?.prepared, 'reused');
  t.equal(gitSync(checkout, 'rev-parse', 'HEAD'), before, 'the upstream commit was not pulled');
  t.not(before, upstream);
  t.ok(existsSync(path.join(checkout, 'local.txt')), 'local changes survive');
  t.notOk(argv.some((args) => ['pull', 'fetch', 'reset', 'checkout', 'clean'].includes(args[0]!)), 'no pull, fetch, reset or clean');
  t.match(log.lines, [{ message: 'repository cloned' }, { message: 'repository checkout reused' }]);
});

t.test('another branch: switched when clean and the remote matches; a dirty checkout or another remote is left and logged', async (t) => {
  const root = tempDir('fleetplane-repos-');
  const bare = bareRepository(root, 'site');
  const first = await setup(t, [{ url: bare }], { root });
  await first.service.prepare();
  const checkout = path.join(root, 'site');

  writeFileSync(path.join(checkout, 'README.md'), 'edited\n');
  const dirty = await setup(t, [{ url: bare, branch: 'feature' }], { root });
  await dirty.service.prepare();
  t.equal(gitSync(checkout, 'branch', '--show-current'), 'main', 'a dirty checkout stays on its branch');
  t.match(dirty.log.lines, [{ level: 'warn', details: { branch: 'main', wanted: 'feature' }, message: /not switched: the checkout has uncommitted changes/ }]);
  t.equal(readFileSync(path.join(checkout, 'README.md'), 'utf8'), 'edited\n');

  gitSync(checkout, 'checkout', '--quiet', '--', 'README.md');
  gitSync(checkout, 'remote', 'set-url', 'origin', `${bare}-elsewhere`);
  const otherRemote = await setup(t, [{ url: bare, branch: 'feature' }], { root });
  await otherRemote.service.prepare();
  t.equal(gitSync(checkout, 'branch', '--show-current'), 'main');
  t.match(otherRemote.log.lines, [{ level: 'warn', message: /remote is not this URL/ }]);

  gitSync(checkout, 'remote', 'set-url', 'origin', bare);
  const clean = await setup(t, [{ url: bare, branch: 'feature' }], { root });
  await clean.service.prepare();
  t.equal(clean.service.repositories[0]?.prepared, 'switched');
  t.equal(gitSync(checkout, 'branch', '--show-current'), 'feature');
});

t.test('shutdown commits and pushes each enabled checkout on its current branch', async (t) => {
  const root = tempDir('fleetplane-repos-');
  const site = bareRepository(root, 'site');
  const docs = bareRepository(root, 'docs');
  const skipped = bareRepository(root, 'skipped');
  const { service, log } = await setup(t, [{ url: site, branch: 'feature' }, { url: docs }, { url: skipped, onShutdown: false }], { root });
  await service.prepare();
  for (const name of ['site', 'docs', 'skipped']) writeFileSync(path.join(root, name, 'page.html'), `<h1>${name}</h1>\n`);
  await service.checkpoint(60_000, 'SIGTERM');
  t.equal(gitSync(site, 'log', '-1', '--format=%s', 'feature'), 'Checkpoint of srv-1 at shutdown (SIGTERM)');
  t.equal(gitSync(site, 'log', '-1', '--format=%s', 'main'), 'first', 'the other branch is untouched');
  t.equal(gitSync(docs, 'show', 'main:page.html'), '<h1>docs</h1>');
  t.equal(gitSync(skipped, 'log', '-1', '--format=%s', 'main'), 'first', 'onShutdown: false pushes nothing');
  t.match(log.lines.filter((line) => line.message === 'repository checkpointed').map((line) => line.details.outcome), ['pushed', 'pushed']);

  await service.checkpoint(60_000, 'SIGTERM');
  t.match(log.lines.filter((line) => line.message === 'repository checkpointed').map((line) => line.details.outcome), ['pushed', 'pushed', 'unchanged', 'unchanged']);
});

/** Two prepared checkouts with a change each; pushes of the first never finish. */
async function stuckThenNext(t: Test, stuckTimeoutMs: number) {
  const root = tempDir('fleetplane-repos-');
  const stuck = bareRepository(root, 'stuck');
  const next = bareRepository(root, 'next');
  const { service, log } = await setup(t, [{ url: stuck, shutdownTimeoutMs: stuckTimeoutMs }, { url: next }], { root });
  await service.prepare();
  const pidFile = hangPushes(stuck);
  for (const name of ['stuck', 'next']) writeFileSync(path.join(root, name, 'change.txt'), 'x\n');
  return { service, log, next, pidFile };
}

t.test('a hanging push is cut at its timeout, its helpers with it, and the next entry still runs', async (t) => {
  const { service, log, next, pidFile } = await stuckThenNext(t, 1_500);
  await service.checkpoint(60_000, 'SIGINT');
  t.match(log.lines.filter((line) => line.level !== 'info'), [{ level: 'error', details: { index: 0, reason: /timed out after 1500 ms|cut/ }, message: 'repository checkpoint failed' }]);
  t.equal(gitSync(next, 'log', '-1', '--format=%s', 'main'), 'Checkpoint of srv-1 at shutdown (SIGINT)');
  const hookPid = Number(readFileSync(pidFile, 'utf8'));
  const alive = () => {
    try {
      process.kill(hookPid, 0);
      return true;
    } catch {
      return false;
    }
  };
  await until('the hanging hook process to be gone', () => (alive() ? undefined : true), 2_000).catch(() => undefined);
  t.notOk(alive(), 'the hanging hook process was killed with the push');
});

t.test('the remaining shutdown budget bounds a push below its own timeout; later entries are reported, not run', async (t) => {
  const { service, log } = await stuckThenNext(t, 600_000);
  await service.checkpoint(1_000, 'SIGTERM');
  t.match(log.lines.filter((line) => line.level !== 'info'), [
    { level: 'error', details: { index: 0 }, message: 'repository checkpoint failed' },
    { level: 'warn', details: { index: 1 }, message: 'repository not checkpointed: the shutdown budget is spent' },
  ]);
});

t.test('a duplicate URL or the project itself as destination is refused before any clone', async (t) => {
  const root = tempDir('fleetplane-repos-');
  const bare = bareRepository(root, 'site');
  const duplicate = await setup(t, [{ url: bare }, { url: bare, directory: 'copy' }], { root });
  await duplicate.service.prepare();
  t.notOk(existsSync(path.join(root, 'site')));
  t.notOk(existsSync(path.join(root, 'copy')));
  t.same(duplicate.argv, [], 'git never ran');
  t.match(duplicate.log.lines, [{ level: 'error', details: { reason: /repositories\[1\]\.url: the same URL/ }, message: 'cluster repositories refused; nothing is cloned' }]);

  const self = await setup(t, [{ url: bare, directory: 'project' }], { root });
  await self.service.prepare();
  t.same(self.argv, []);
  t.match(self.log.lines, [{ level: 'error', details: { reason: /is the running project/ } }]);
});

t.test('malformed entries are refused by index and field while the others are cloned', async (t) => {
  const root = tempDir('fleetplane-repos-');
  const bare = bareRepository(root, 'site');
  const { service, log } = await setup(t, [{ branch: 'main' }, { url: bare }, { url: `${bare}x`, shutdownTimeoutMs: 'soon' }, { url: `${bare}y`, onShutdown: 'push' }], { root });
  await service.prepare();
  t.ok(existsSync(path.join(root, 'site', 'README.md')));
  t.same(log.lines.filter((line) => line.message === 'repository entry refused').map((line) => line.details.field), [
    'repositories[0].url', 'repositories[2].shutdownTimeoutMs', 'repositories[3].onShutdown',
  ]);
});

function filesUnder(directory: string): string[] {
  return readdirSync(directory, { recursive: true, withFileTypes: true }).filter((entry) => entry.isFile()).map((entry) => path.join(entry.parentPath, entry.name));
}

t.test('over authenticated HTTPS-style remotes the credential reaches git only through askpass: never argv, ps, logs, .git/config or the checkout', async (t) => {
  const root = tempDir('fleetplane-repos-');
  const TOKEN = 'ghp_SuperSecretToken0123456789';
  bareRepository(root, 'site');
  const forge = await smartHttpServer(t, root, TOKEN);
  const url = `${forge.url}/remotes/site.git`;
  const { service, store, log, argv } = await setup(t, [{ url }], { root });
  await store.collection('apis').insertOne({
    _id: 'api_forge', organization_id: ORG, name: 'forge', baseUrl: forge.url, endpoints: {},
    headers: { authorization: { secret: `Bearer ${TOKEN}` } },
  });
  await service.prepare();
  t.equal(service.repositories[0]?.prepared, 'cloned', JSON.stringify(log.lines));
  const checkout = path.join(root, 'site');
  writeFileSync(path.join(checkout, 'page.html'), 'hello\n');
  await service.checkpoint(60_000, 'SIGTERM');
  t.equal(gitSync(path.join(root, 'remotes', 'site.git'), 'show', 'main:page.html'), 'hello', 'the authenticated push landed');

  t.ok(forge.credentials.length > 0 && forge.credentials.every((credential) => credential === `x-access-token:${TOKEN}`), 'the forge got the token');
  t.notMatch(JSON.stringify(argv), TOKEN, 'not in any git argv');
  t.ok(forge.psDuringRun.length > 0);
  t.notOk(forge.psDuringRun.some((ps) => ps.includes(TOKEN)), 'not in ps output while git ran');
  t.notMatch(log.text(), TOKEN, 'not in logs');
  t.notOk(filesUnder(checkout).some((file) => readFileSync(file).includes(TOKEN)), 'not anywhere in the checkout, .git/config included');
  t.notOk(filesUnder(path.join(root, 'state')).some((file) => readFileSync(file).includes(TOKEN)), 'not in the state directory either');
  t.equal(statSync(path.join(root, 'state', 'bin', 'askpass')).mode & 0o777, 0o700);
});

t.test('ssh remotes always check host keys strictly, with the key and known hosts kept outside the checkout', async (t) => {
  const root = tempDir('fleetplane-repos-');
  const KEY = '-----BEGIN OPENSSH PRIVATE KEY-----\nnot-a-real-key\n-----END OPENSSH PRIVATE KEY-----';
  const { service, store } = await setup(t, [], { root });
  await store.collection('apis').insertOne({
    _id: 'api_gh', organization_id: ORG, name: 'github', baseUrl: 'https://github.com', endpoints: {},
    headers: { 'git-ssh-key': { secret: KEY }, 'git-known-hosts': 'github.com ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl' },
  });
  const env = await service.environment('git@github.com:owner/site.git');
  t.match(env.GIT_SSH_COMMAND, /-o StrictHostKeyChecking=yes/);
  t.notMatch(env.GIT_SSH_COMMAND, KEY);
  const keyFile = /-i '([^']+)'/.exec(env.GIT_SSH_COMMAND!)![1]!;
  t.ok(keyFile.startsWith(path.join(root, 'state')));
  t.equal(readFileSync(keyFile, 'utf8'), `${KEY}\n`);
  t.equal(statSync(keyFile).mode & 0o777, 0o600);
  t.match(env.GIT_SSH_COMMAND, /UserKnownHostsFile=/);
  t.equal(env.GIT_ASKPASS, undefined);
  const plain = await service.environment('git@gitlab.example.com:owner/site.git');
  t.equal(plain.GIT_SSH_COMMAND, 'ssh -o StrictHostKeyChecking=yes -o BatchMode=yes', 'no matching record: strict checking all the same');
});

t.test('git credential headers stay with the provider: API calls never send them upstream', async (t) => {
  const provider = compileProvider({
    name: 'forge', baseUrl: 'https://git.example.com', endpoints: { user: { method: 'get', path: '/user' } },
    headers: { authorization: { secret: 'Bearer t' }, 'Git-SSH-Key': { secret: 'key' }, 'git-known-hosts': 'h', 'git-username': 'u' },
  });
  t.equal(provider.headers.authorization, 'Bearer t');
  t.notOk(Object.keys(provider.headers).some((name) => name.startsWith('git-')));
});
