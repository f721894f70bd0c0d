/**
 * A throwaway PostgreSQL server, for a test file or a benchmark: `initdb` into a temporary directory, `postgres`
 * on 127.0.0.1 (or `listenAddress`, inside network namespace `netns` when given) at a free port, its socket in
 * that directory. TCP connections authenticate with a password (SCRAM, as a production server would, so a test
 * can try a wrong one); the socket trusts its owner, and the harness itself goes through it, so it reaches a
 * server in another namespace too. Run as the unprivileged `postgres` user when run as root (PostgreSQL refuses
 * root), as the current user otherwise. Durability is worthless for a server that lives one run: no fsync, no
 * full-page writes, no synchronous commit. A test can stop and start it again on the same port keeping its data,
 * or freeze it (SIGSTOP, sockets left open) to make it hang. Plain JavaScript without tap, so that benchmarks
 * start theirs the same way (test/helpers/postgres.ts adds the test run's budgets and exit handlers).
 */
import { execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { appendFileSync, chownSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pg from 'pg';

const DEBIAN_ROOT = '/usr/lib/postgresql';
const TOOLS = ['initdb', 'postgres', 'pg_ctl'];

const DEFAULT_SETTINGS = { fsync: 'off', full_page_writes: 'off', synchronous_commit: 'off', shared_buffers: '16MB', logging_collector: 'off' };

/** The newest installed PostgreSQL's `bin` directory (FLEETPLANE_TEST_POSTGRES_BIN overrides), if any. */
export function postgresBin() {
  const chosen = process.env.FLEETPLANE_TEST_POSTGRES_BIN;
  if (chosen) return chosen;
  let versions;
  try {
    versions = readdirSync(DEBIAN_ROOT).filter((name) => /^\d+$/.test(name)).sort((a, b) => Number(b) - Number(a));
  } catch {
    return undefined;
  }
  return versions.map((version) => path.join(DEBIAN_ROOT, version, 'bin')).find((bin) => TOOLS.every((tool) => existsSync(path.join(bin, tool))));
}

function unprivilegedUser() {
  try {
    const line = readFileSync('/etc/passwd', 'utf8').split('\n').find((entry) => entry.startsWith('postgres:'));
    const [name, , uid, gid] = line?.split(':') ?? [];
    return name && uid && gid ? { name, uid: Number(uid), gid: Number(gid) } : undefined;
  } catch {
    return undefined;
  }
}

/** Why no server can be started here (the reason a test skips with), or undefined when one can. */
export function postgresUnavailable() {
  if (!postgresBin()) return `PostgreSQL is not installed (no ${DEBIAN_ROOT}/<version>/bin with ${TOOLS.join(', ')}; Debian package "postgresql")`;
  if (process.getuid?.() === 0 && !unprivilegedUser()) return 'running as root without a "postgres" user to run PostgreSQL as';
  return undefined;
}

/** argv that runs `command` as `account` (no fork in between: the pid is the command's own), or as is. */
const asUser = (account, command, args) => (account ? ['setpriv', [`--reuid=${account.uid}`, `--regid=${account.gid}`, '--init-groups', '--', command, ...args]] : [command, args]);

/** argv that runs `command` inside network namespace `netns` (`ip netns exec` execs it: the pid stays), or as is. */
const inNamespace = (netns, [command, args]) => (netns ? ['ip', ['netns', 'exec', netns, command, ...args]] : [command, args]);

const freePort = () =>
  new Promise((resolve, reject) => {
    const server = net.createServer().once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });

/** The pids whose parent is `parent` (a postmaster's backends and helpers; each leads its own process group). */
function childrenOf(parent) {
  const children = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      // The command name, in parentheses, may hold spaces: the fields that follow come after the last ')'.
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      if (Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) === parent) children.push(Number(entry));
    } catch {
      // gone meanwhile
    }
  }
  return children;
}

const signal = (pid, name) => {
  try {
    process.kill(pid, name);
  } catch {
    // gone meanwhile
  }
};

/**
 * Starts a server with the database `database` created. `onExit` registers the synchronous clean-up for the
 * process's exit however it ends (default: `process.once('exit')`); `scale` stretches the waits; `describe` says
 * how a budget reads in an error.
 */
export async function startPostgres({ database = 'fleetplane_test', settings = {}, listenAddress = '127.0.0.1', netns, readyBudgetMs = 30_000, onExit, scale = (ms) => ms, describe = (ms) => `${ms} ms`, env = process.env } = {}) {
  const reason = postgresUnavailable();
  if (reason) throw new Error(reason);
  const bin = postgresBin();
  const account = process.getuid?.() === 0 ? unprivilegedUser() : undefined;
  const root = mkdtempSync(path.join(tmpdir(), 'fleetplane-pg-'));
  const data = path.join(root, 'data');
  let postmaster;
  let frozen = false;
  const alive = () => postmaster !== undefined && postmaster.exitCode === null && postmaster.signalCode === null;
  const thawNow = () => {
    if (!frozen || !alive()) return void (frozen = false);
    for (const child of childrenOf(postmaster.pid)) signal(child, 'SIGCONT');
    signal(postmaster.pid, 'SIGCONT');
    frozen = false;
  };
  // Synchronous, for the exit handlers: an immediate shutdown (pg_ctl waits for it), then the directory.
  let undone = false;
  const cleanUp = () => {
    if (undone) return;
    undone = true;
    thawNow();
    if (alive()) {
      try {
        const [command, args] = asUser(account, path.join(bin, 'pg_ctl'), ['stop', '-D', data, '-m', 'immediate', '-w', '-t', '10']);
        execFileSync(command, args, { stdio: 'ignore', timeout: 15_000 });
      } catch {
        signal(postmaster.pid, 'SIGKILL');
      }
    }
    rmSync(root, { recursive: true, force: true });
  };
  const undo = onExit ? onExit(cleanUp) : (process.once('exit', cleanUp), cleanUp);
  try {
    const password = randomBytes(12).toString('hex');
    const passwordFile = path.join(root, 'password');
    writeFileSync(passwordFile, `${password}\n`, { mode: 0o600 });
    if (account) for (const owned of [root, passwordFile]) chownSync(owned, account.uid, account.gid);
    const [initCommand, initArgs] = asUser(account, path.join(bin, 'initdb'), [
      '-D', data, '-U', 'postgres', `--pwfile=${passwordFile}`, '--auth-local=trust', '--auth-host=scram-sha-256',
      '--encoding=UTF8', '--locale=C', '--no-sync', '--no-instructions',
    ]);
    execFileSync(initCommand, initArgs, { stdio: ['ignore', 'pipe', 'pipe'], timeout: scale(60_000) });
    // initdb allows passwords from loopback only; a server on another address is reached from anywhere.
    appendFileSync(path.join(data, 'pg_hba.conf'), 'host all all 0.0.0.0/0 scram-sha-256\nhost all all ::/0 scram-sha-256\n');
    const port = await freePort();
    const all = { ...DEFAULT_SETTINGS, ...settings, listen_addresses: listenAddress, port, unix_socket_directories: root };
    const argv = inNamespace(netns, asUser(account, path.join(bin, 'postgres'), ['-D', data, ...Object.entries(all).flatMap(([name, value]) => ['-c', `${name}=${value}`])]));
    // Through the socket in `root`: a file, so reachable whatever namespace the server listens in.
    const connectLocal = async (name, query) => {
      const client = new pg.Client({ host: root, port, user: 'postgres', database: name, connectionTimeoutMillis: scale(5_000) });
      await client.connect();
      try {
        return await query(client);
      } finally {
        await client.end().catch(() => undefined);
      }
    };
    let exited;
    const launch = async () => {
      postmaster = spawn(argv[0], argv[1], { detached: true, stdio: ['ignore', 'ignore', 'pipe'], env });
      let log = '';
      postmaster.stderr.on('data', (chunk) => (log = (log + chunk).slice(-4_000)));
      const child = postmaster;
      exited = new Promise((resolve) => child.once('exit', () => resolve()));
      const deadline = Date.now() + scale(readyBudgetMs);
      for (;;) {
        if (!alive()) throw new Error(`PostgreSQL exited while starting: ${log}`);
        try {
          await connectLocal('postgres', (client) => client.query('SELECT 1'));
          return;
        } catch (error) {
          if (Date.now() > deadline) throw new Error(`PostgreSQL did not accept connections within ${describe(readyBudgetMs)}: ${error.message}; ${log}`);
          await new Promise((resolve) => setTimeout(resolve, 50));
        }
      }
    };
    const halt = async () => {
      thawNow();
      if (!alive()) return;
      // SIGINT is PostgreSQL's fast shutdown: clients are disconnected, then a clean stop.
      postmaster.kill('SIGINT');
      const child = postmaster;
      const timer = setTimeout(() => child.kill('SIGKILL'), scale(15_000));
      await exited;
      clearTimeout(timer);
    };
    await launch();
    await connectLocal('postgres', (client) => client.query(`CREATE DATABASE ${database}`));
    const base = `postgres://postgres:${password}@${listenAddress.includes(':') ? `[${listenAddress}]` : listenAddress}:${port}`;
    let stopping;
    // One change of state at a time: a start racing a stop would leave a postmaster nobody tracks.
    let queue = Promise.resolve();
    const serially = (step) => (queue = queue.catch(() => undefined).then(step));
    return {
      host: listenAddress,
      port,
      database,
      password,
      url: (name = database) => `${base}/${name}`,
      query: (sql, values, name = database) => connectLocal(name, (client) => client.query(sql, values)),
      pid: () => (alive() ? postmaster.pid : undefined),
      running: () => alive(),
      stopKeepingData: () => serially(halt),
      start: () => serially(async () => (alive() ? undefined : launch())),
      restart: () => serially(async () => (await halt(), await launch())),
      freeze: () =>
        serially(async () => {
          if (frozen || !alive()) return;
          // The postmaster first, so that it forks no backend the list below would miss.
          signal(postmaster.pid, 'SIGSTOP');
          for (const child of childrenOf(postmaster.pid)) signal(child, 'SIGSTOP');
          frozen = true;
        }),
      thaw: () => serially(async () => thawNow()),
      stop: () =>
        (stopping ??= serially(async () => {
          await halt();
          undo();
        })),
    };
  } catch (error) {
    undo();
    throw error;
  }
}
