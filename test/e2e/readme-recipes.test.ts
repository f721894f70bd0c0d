import t, { type Test } from 'tap';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { loadConfig } from '../../src/config/load.js';
import { openStore } from '../../src/db/open.js';
import { cleanEnv, isAlive, request } from '../helpers/server-process.js';
import { Foreground, Session, blocksOf, cloneDirectory, killLocalServers, portMap, recipeEnv, until, workingDirectory } from './readme-fixture.js';

// Each recipe runs as a reader runs it: a first terminal for the server, a second for the rest, in an empty
// directory where `npx fleetplane` is this build. Only fixed ports change (the machine is shared); the local
// provider's servers go under the test's own directory (TMPDIR: the provider's default root is the system temp
// directory) so that whatever happens they are found and stopped.
t.setTimeout(600_000);

/** Waits for /readyz 200; fails at once, with what the terminal printed, when its process ended first. */
const ready = (port: number, terminal: Foreground) =>
  until(`the server on ${port} to be ready`, async () => {
    if (terminal.child.exitCode !== null || terminal.child.signalCode !== null) throw new Error(`the terminal ended before the server on ${port} was ready:\n${terminal.output}`);
    return request(port, '/readyz').then((reply) => reply.status === 200, () => false);
  }, 180_000).catch((error: Error) => {
    throw new Error(`${error.message}; the terminal printed:\n${terminal.output.slice(-4000)}`);
  });
/** A recipe's directory for the servers the built-in local provider starts, stopped after the test. */
function localRoot(t: Test, cwd: string): string {
  const root = path.join(cwd, 'local-servers');
  mkdirSync(root);
  t.teardown(() => killLocalServers(root));
  return root;
}
/** The pids of the servers the local provider started under `root`. */
const localPids = (root: string) => readdirSync(root).flatMap((entry) => {
  const file = path.join(root, entry, 'instance.json');
  return existsSync(file) ? [(JSON.parse(readFileSync(file, 'utf8')) as { pid: number }).pid] : [];
});

t.test('docs/mesh.md "Three servers on one host", run as written (data directories not created beforehand): one admin key is saved, every server serves and they mesh', async (t) => {
  const [script] = blocksOf('docs/mesh.md', '## Three servers on one host');
  const { port, substitute } = await portMap([8080, 8081, 8082, 8090, 8091, 8092]);
  const run = substitute(script!);
  t.not(run, script, 'the ports were found in the recipe');
  const cwd = workingDirectory();
  const servers = new Foreground(t, `${run}\nwait`, { cwd });
  for (const fixed of [8080, 8081, 8082]) await ready(port(fixed), servers);
  const keyFiles = ['data-a', 'data-b', 'data-c'].map((dir) => path.join(cwd, dir, 'admin.key')).filter((file) => existsSync(file));
  t.equal(keyFiles.length, 1, 'exactly one server created the organization and saved its admin key');
  t.equal(spawnSync('bash', ['-c', 'cat data-*/admin.key'], { cwd, encoding: 'utf8' }).stdout.trim().split('\n').length, 1, 'the recipe\'s `cat data-*/admin.key` reads that one key');
  t.match(servers.output, /saved to .*admin\.key \(mode 0600\); read it from there\./, 'where the key is, printed (stdout is not a terminal)');
  t.notMatch(servers.output, /Error|ENOENT|\n\s+at /, 'no error and no stack trace');

  // "Check the links": the workers of all three servers answer through node A's control socket.
  let answering = new Set<string>();
  await until('all three servers to answer', () => {
    const status = spawnSync('npx', ['fleetplane', 'ctl', 'status', '--broadcast', '--json', '--data-dir', './data-a'], { cwd, encoding: 'utf8', env: cleanEnv(), timeout: 30_000 });
    if (status.status === 0) answering = new Set(JSON.parse(status.stdout).replies.map((reply: { server: string }) => reply.server));
    return answering.size === 3;
  });
  t.same([...answering].sort(), ['node-a', 'node-b', 'node-c'], 'ctl status --broadcast answers from all three servers');
});

t.test('docs/managed-fleet.md "On one host", run as written: the tenant in both stores under one id, a server created, confirmed and retired', async (t) => {
  const [parentBlock, tenantBlock, createBlock, terminateBlock] = blocksOf('docs/managed-fleet.md', '## On one host, with the built-in `local` provider');
  const { port, substitute } = await portMap([8080]);
  const cwd = workingDirectory();
  const root = localRoot(t, cwd);
  const parent = new Foreground(t, substitute(parentBlock!), { cwd, env: recipeEnv({ TMPDIR: root }) });
  await ready(port(8080), parent);

  const session = new Session(t, { cwd });
  const tenant = await session.run(substitute(tenantBlock!));
  t.match(tenant, /Created organization "acme" \([0-9a-f]{24}\) for acme\.localhost/, 'init --id made the tenant the first organization of its cluster\'s store');
  t.match(tenant, /^cluster [0-9a-f]{24}$/m, 'the cluster document was created');
  t.notMatch(tenant, /fleetplane: |error/i, 'no command failed');
  const ids = (await session.run('echo "$PLATFORM $ACME $CLUSTER"')).trim().split(' ');
  t.equal(ids.length, 3);
  const [platform, acme] = ids as [string, string, string];
  for (const dir of ['parent', 'acme']) {
    const listed = JSON.parse(spawnSync('npx', ['fleetplane', 'orgs', 'list', '--json', '--data-dir', `./${dir}`], { cwd, encoding: 'utf8', env: cleanEnv(), timeout: 30_000 }).stdout);
    t.ok(listed.some((organization: { organization_id: string; name: string }) => organization.organization_id === acme && organization.name === 'acme'), `acme has the same id in ./${dir}`);
  }
  t.not(platform, acme);

  // Step 3: createServer, then the record read until it says running (the second command, as a reader repeats it).
  const [, readStatus] = substitute(createBlock!).split(/\n(?=curl )/);
  const created = await session.run(substitute(createBlock!));
  t.match(created, /^(starting|running)$/m, 'the new server\'s record');
  await until('the new server to confirm', async () => (await session.run(readStatus!)).trim() === 'running' || undefined, 120_000);
  const serverId = (await session.run('echo "$SERVER"')).trim();
  const store = await openStore(loadConfig({ env: {}, object: { dataDir: path.join(cwd, 'acme') } }).config);
  t.teardown(() => store.close());
  t.match(await store.collection('servers').findOne({ _id: serverId }), { organization_id: acme, master: { status: 'running' } }, 'the tenant copy of the record, in the cluster\'s own store, belongs to acme');
  const [pid] = localPids(root);
  t.ok(pid && isAlive(pid), 'the local provider started the server');

  // Step 4: retire it.
  t.match(await session.run(substitute(terminateBlock!)), /"status":"terminating"/);
  await until('the retired server to exit', () => !isAlive(pid!), 60_000);
  await parent.stop();
});

t.test('docs/autoscaling.md "A scale-out on one host", run as written: below minClusterSize, the autoscaler asks the local provider for a second server', async (t) => {
  const [startBlock, policyBlock] = blocksOf('docs/autoscaling.md', '## A scale-out on one host, with the built-in `local` provider');
  const { port, substitute } = await portMap([8080, 8090]);
  const cwd = workingDirectory();
  const root = localRoot(t, cwd);
  const first = new Foreground(t, substitute(startBlock!), { cwd, env: recipeEnv({ TMPDIR: root }) });
  await ready(port(8080), first);
  const session = new Session(t, { cwd });
  t.match(await session.run(substitute(policyBlock!)), /"insertedIds":\["[0-9a-f]{24}"\]/, 'the cluster document with its policy');
  const readServers = substitute(policyBlock!).split(/\n(?=curl )/).at(-1)!;
  await first.waitFor(/autoscaler decided scale-out \(below-min\)/, 60_000);
  await until('a second server running', async () => {
    const documents = JSON.parse((await session.run(readServers)).trim()).documents as Array<{ master?: { status?: string } }>;
    return documents.filter((document) => document.master?.status === 'running').length >= 2 || undefined;
  }, 90_000);
  t.pass('the cluster grew to two running servers');
  await first.stop();
  await until('the started server to stop with the first', () => localPids(root).every((pid) => !isAlive(pid)), 60_000);
});

t.test('docs/lifecycle.md "Routing hooks", tried on one host as written: the node registers with the example edge once ready and withdraws at Ctrl-C', async (t) => {
  const [edgeBlock, nodeBlock] = blocksOf('docs/lifecycle.md', '## Routing hooks');
  const { port, substitute } = await portMap([8080, 9000]);
  const cwd = cloneDirectory(substitute);
  const edge = new Foreground(t, substitute(edgeBlock!), { cwd });
  await edge.waitFor(/example upstream on http:\/\/127\.0\.0\.1:\d+/);
  const lines = substitute(nodeBlock!).trim().split('\n');
  const session = new Session(t, { cwd });
  const prepared = await session.run(lines.slice(0, -1).join('\n'));
  t.notMatch(prepared, /^fleetplane: /m, 'init and apply succeeded');
  const node = new Foreground(t, lines.at(-1)!, { cwd });
  await ready(port(8080), node);
  await edge.waitFor(/POST \/v1\/origins \{"server_id":"[^"]+","cluster_id":"default","address":"203\.0\.113\.10"/);
  const stopped = node.stop();
  await edge.waitFor(/POST \/v1\/origins\/remove \{[^\n]*"registration_ids":\["[0-9a-f-]{36}"\][^\n]*"reason":"SIGINT"/);
  await stopped;
  t.notMatch(node.output, /routing workflow failed/, 'the workflow ran');
});

t.test('docs/lifecycle.md "Cluster repositories", tried on one host as written: the document found by name, the checkout cloned at start, a change pushed at shutdown', async (t) => {
  const [startBlock, setupBlock, changeBlock] = blocksOf('docs/lifecycle.md', '## Cluster repositories');
  const { port, substitute } = await portMap([8080]);
  const cwd = workingDirectory();
  const start = substitute(startBlock!);
  const first = new Foreground(t, start, { cwd });
  await ready(port(8080), first);
  // A reader's git knows who they are; the test's may not.
  const session = new Session(t, { cwd, env: recipeEnv({ GIT_AUTHOR_NAME: 'Reader', GIT_AUTHOR_EMAIL: 'reader@example.com', GIT_COMMITTER_NAME: 'Reader', GIT_COMMITTER_EMAIL: 'reader@example.com' }) });
  t.match(await session.run(substitute(setupBlock!)), /"insertedIds":\["[0-9a-f]{24}"\]/, 'the cluster document');
  await first.stop();

  const second = new Foreground(t, start, { cwd });
  await ready(port(8080), second);
  t.ok(existsSync(path.join(cwd, 'site', '.git')), 'started again, the server cloned site.git into ./site');
  const [change, , log] = changeBlock!.trim().split('\n');
  await session.run(change!);
  await second.stop();
  const history = (await session.run(log!)).trim().split('\n');
  t.equal(history.length, 2, 'the server committed the change and pushed it');
  t.match(history[1], /first page$/);
});
