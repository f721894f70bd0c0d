import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { ROOT, blocksOf, recipeEnv, workingDirectory } from '../e2e/readme-fixture.js';
import { postgresUnavailable, startPostgres, type PostgresServer } from '../helpers/postgres.js';
import { until } from '../helpers/wait.js';
import { killOnExit } from './cleanup.js';
import { address, buildNetwork, names, ns, skipReason, startClient, type Answer, type Client, type Member, type Name } from './netns.js';

// docs/mesh.md "Several hosts", run as an operator runs it: each host a network namespace with its own working
// directory, PostgreSQL in a namespace of its own set up as docs/postgres.md says, the secrets made by the
// recipe's own block. Only the recipe's addresses (and PostgreSQL's port) change; its ports are the namespaces'.

const PAGE = 'docs/mesh.md';
const HEADING = '## Several hosts';
/** The namespace whose address stands in for each address the recipe names. */
const HOSTS: Record<string, Member> = { '10.0.0.1': 'a', '10.0.0.2': 'b', '10.0.0.3': 'c', '10.0.0.10': 'p' };

const why = skipReason ?? postgresUnavailable();
if (why) t.plan(0, why);

/** The fenced blocks of `language` in the section under `heading` of `file`. */
function fencedBlocks(file: string, heading: string, language: string): string[] {
  const lines = readFileSync(path.join(ROOT, file), 'utf8').split('\n');
  const section = lines.slice(lines.indexOf(heading) + 1);
  const end = section.findIndex((line) => /^## /.test(line));
  const blocks: string[] = [];
  let open: string[] | undefined;
  for (const line of section.slice(0, end < 0 ? undefined : end)) {
    if (open) {
      if (line === '```') {
        blocks.push(open.join('\n'));
        open = undefined;
      } else open.push(line);
    } else if (line === `\`\`\`${language}`) open = [];
  }
  return blocks;
}

/** A host's terminal: the block it runs and what it printed. */
type Terminal = ChildProcess & { output: string };

let store: PostgresServer | undefined;
let client: Client | undefined;
const terminals: Terminal[] = [];

if (!why) {
  t.before(() => buildNetwork({ extra: ['p'] }));
  t.teardown(async () => {
    client?.stop();
    await Promise.all(terminals.map((terminal) => stopTerminal(terminal)));
    await store?.stop();
  });
}

/** A block run in `name`'s namespace from `cwd`, as a terminal on that host runs it. */
function terminal(name: Member, script: string, cwd: string, env: NodeJS.ProcessEnv): Terminal {
  const child = spawn('ip', ['netns', 'exec', ns(name), 'bash', '-c', script], { cwd, env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] }) as Terminal;
  killOnExit(child.pid);
  child.output = '';
  child.stdout!.on('data', (chunk) => (child.output += chunk));
  child.stderr!.on('data', (chunk) => (child.output += chunk));
  return child;
}

const groupGone = (child: ChildProcess) => {
  try {
    process.kill(-child.pid!, 0);
    return false;
  } catch {
    return true;
  }
};

/** Ctrl-C, as on the host's terminal; answers whether every process of it ended, else kills them. */
async function stopTerminal(child: ChildProcess): Promise<boolean> {
  if (groupGone(child)) return true;
  process.kill(-child.pid!, 'SIGINT');
  const ended = await until('the terminal\'s processes to end', () => (groupGone(child) ? true : undefined), 30_000).catch(() => false);
  if (!ended) process.kill(-child.pid!, 'SIGKILL');
  return ended;
}

t.test('docs/mesh.md "Several hosts", run on three hosts and PostgreSQL: one admin key, every server serves, they mesh and share the store', async (t) => {
  const [secretsBlock, startBlock, checkBlock] = blocksOf(PAGE, HEADING);
  const configs = fencedBlocks(PAGE, HEADING, 'json');
  t.equal(configs.length, 3, 'one config block per host');
  const [setup] = fencedBlocks('docs/postgres.md', '## Setting up', 'sql');

  store = await startPostgres({ netns: ns('p'), listenAddress: address('p') });
  for (const statement of setup!.split(';').map((text) => text.trim()).filter(Boolean)) await store.query(statement, [], 'postgres');
  const substitute = (text: string) => text.replaceAll('10.0.0.10:5432', `10.0.0.10:${store!.port}`).replace(/\b10\.0\.0\.\d+\b/g, (fixed) => address(HOSTS[fixed]!));

  const made = spawnSync('bash', ['-c', secretsBlock!], { encoding: 'utf8' });
  t.equal(made.status, 0, `the secrets block runs: ${made.stderr}`);
  const [meshSecret, secretsKey] = made.stdout.trim().split('\n');
  const env = recipeEnv({ FLEETPLANE_MESH_SECRET: meshSecret, FLEETPLANE_SECRETS_KEY: secretsKey });

  const directories = new Map<Name, string>();
  for (const [index, name] of names.entries()) {
    const cwd = workingDirectory();
    directories.set(name, cwd);
    writeFileSync(path.join(cwd, 'fleetplane.config.json'), substitute(configs[index]!));
    terminals.push(terminal(name, substitute(startBlock!), cwd, env));
  }
  const answers: Answer[] = [];
  client = startClient(answers);
  for (const [index, name] of names.entries()) {
    const started = terminals[index]!;
    await until(`node-${name} to be ready`, async () => {
      if (started.exitCode !== null) throw new Error(`the terminal of node-${name} ended: ${started.output}`);
      return (await client!.send(name, '/readyz')).status === 200 ? true : undefined;
    }, 90_000, { last: () => started.output.slice(-1_000) });
  }

  const keyFiles = names.map((name) => path.join(directories.get(name)!, 'data', 'admin.key')).filter((file) => existsSync(file));
  t.equal(keyFiles.length, 1, 'exactly one server created the organization and saved its admin key');

  let printed = '';
  await until('ctl status --broadcast to answer from all three servers', () => {
    const check = spawnSync('ip', ['netns', 'exec', ns('b'), 'bash', '-c', substitute(checkBlock!)], { cwd: directories.get('b'), env, encoding: 'utf8', timeout: 30_000 });
    printed = check.stdout;
    return ['node-a', 'node-b', 'node-c'].every((id) => printed.includes(id)) ? true : undefined;
  }, 30_000, { last: () => printed });
  t.pass('ctl status --broadcast on one host answers from the workers of all three servers');

  const key = readFileSync(keyFiles[0]!, 'utf8').trim();
  const crud = (to: Name, body: unknown) => client!.send(to, '/crud', { method: 'POST', headers: { host: 'localhost', authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body: JSON.stringify(body) });
  const created = await crud('a', { method: 'object.create', collection: 'notes', documents: [{ text: 'written on A' }] });
  t.equal(created.status, 200, `a document written through A: ${created.body}`);
  const read = await crud('c', { method: 'object.read', collection: 'notes', filter: { text: 'written on A' } });
  t.match(JSON.parse(read.body ?? '{}'), { documents: [{ text: 'written on A' }] }, 'C reads it: the hosts share the store');
  const stored = await store.query("SELECT count(*)::int AS n FROM fleetplane_documents WHERE collection = 'notes'", [], 'fleetplane');
  t.equal(stored.rows[0].n, 1, 'the document is in PostgreSQL');
  for (const name of names) t.notOk(existsSync(path.join(directories.get(name)!, 'data', 'fleetplane.db')), `no embedded store file on node-${name}`);

  const stopped = await Promise.all(terminals.map((terminal) => stopTerminal(terminal)));
  for (const [index, name] of names.entries()) t.ok(stopped[index], `node-${name} stops on Ctrl-C`);
});
