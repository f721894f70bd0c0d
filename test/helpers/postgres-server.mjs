/**
 * A throwaway PostgreSQL server, for a test file or a benchmark: `initdb` into a temporary directory, `postgres`
 * on 127.0.0.1 at a free port, its socket in that directory. TCP connections authenticate with a password
 * (SCRAM, as a production server would, so a test can try a wrong one); the socket trusts its owner. Run as the
 * unprivileged `postgres` user when run as root (PostgreSQL refuses root), as the current user otherwise.
 * Durability is worthless for a server that lives one run: no fsync, no full-page writes, no synchronous commit.
 * Plain JavaScript without tap, so that benchmarks start theirs the same way (test/helpers/postgres.ts adds the
 * test run's budgets and exit handlers).
 */
import { execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chownSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
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

const freePort = () =>
  new Promise((resolve, reject) => {
    const server = net.createServer().once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });

async function connectOnce(url) {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 2_000 });
  try {
    await client.connect();
    await client.query('SELECT 1');
  } finally {
    await client.end().catch(() => undefined);
  }
}

/**
 * Starts a server with the database `database` created. `onExit` registers the synchronous clean-up for the
 * process's exit however it ends (default: `process.once('exit')`); `scale` stretches the waits; `describe` says
 * how a budget reads in an error.
 */
export async function startPostgres({ database = 'fleetplane_test', settings = {}, readyBudgetMs = 30_000, onExit, scale = (ms) => ms, describe = (ms) => `${ms} ms`, env = process.env } = {}) {
  const reason = postgresUnavailable();
  if (reason) throw new Error(reason);
  const bin = postgresBin();
  const account = process.getuid?.() === 0 ? unprivilegedUser() : undefined;
  const root = mkdtempSync(path.join(tmpdir(), 'fleetplane-pg-'));
  const data = path.join(root, 'data');
  let postmaster;
  const alive = () => postmaster?.exitCode === null && postmaster.signalCode === null;
  // Synchronous, for the exit handlers: an immediate shutdown (pg_ctl waits for it), then the directory.
  let undone = false;
  const cleanUp = () => {
    if (undone) return;
    undone = true;
    if (alive()) {
      try {
        const [command, args] = asUser(account, path.join(bin, 'pg_ctl'), ['stop', '-D', data, '-m', 'immediate', '-w', '-t', '10']);
        execFileSync(command, args, { stdio: 'ignore', timeout: 15_000 });
      } catch {
        try {
          process.kill(-postmaster.pid, 'SIGKILL');
        } catch {
          // gone meanwhile
        }
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
    const port = await freePort();
    const all = { ...DEFAULT_SETTINGS, ...settings, listen_addresses: '127.0.0.1', port, unix_socket_directories: root };
    const [command, args] = asUser(account, path.join(bin, 'postgres'), ['-D', data, ...Object.entries(all).flatMap(([name, value]) => ['-c', `${name}=${value}`])]);
    postmaster = spawn(command, args, { detached: true, stdio: ['ignore', 'ignore', 'pipe'], env });
    let log = '';
    postmaster.stderr.on('data', (chunk) => (log = (log + chunk).slice(-4_000)));
    const exited = new Promise((resolve) => postmaster.once('exit', () => resolve()));
    const base = `postgres://postgres:${password}@127.0.0.1:${port}`;
    const deadline = Date.now() + scale(readyBudgetMs);
    for (;;) {
      if (!alive()) throw new Error(`PostgreSQL exited while starting: ${log}`);
      try {
        await connectOnce(`${base}/postgres`);
        break;
      } catch (error) {
        if (Date.now() > deadline) throw new Error(`PostgreSQL did not accept connections within ${describe(readyBudgetMs)}: ${error.message}; ${log}`);
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    }
    const query = async (sql, values, name = database) => {
      const client = new pg.Client({ connectionString: `${base}/${name}` });
      await client.connect();
      try {
        return await client.query(sql, values);
      } finally {
        await client.end().catch(() => undefined);
      }
    };
    await query(`CREATE DATABASE ${database}`, [], 'postgres');
    let stopping;
    return {
      host: '127.0.0.1',
      port,
      database,
      password,
      url: (name = database) => `${base}/${name}`,
      query,
      stop: () =>
        (stopping ??= (async () => {
          if (alive()) {
            // SIGINT is PostgreSQL's fast shutdown: clients are disconnected, then a clean stop.
            postmaster.kill('SIGINT');
            const timer = setTimeout(() => postmaster.kill('SIGKILL'), scale(15_000));
            await exited;
            clearTimeout(timer);
          }
          undo();
        })()),
    };
  } catch (error) {
    undo();
    throw error;
  }
}
