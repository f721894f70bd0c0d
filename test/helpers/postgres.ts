/**
 * A real PostgreSQL server for a test file: `initdb` into a temporary directory, `postgres` on 127.0.0.1 at a
 * free port, its socket in that directory. TCP connections authenticate with a password (SCRAM, as a
 * production server would, so a test can try a wrong one); the socket trusts its owner. Run as the unprivileged `postgres` user when the tests run as root (PostgreSQL
 * refuses root), as the current user otherwise. Stopped (a fast shutdown) and its directory removed when the
 * file ends, however it ends: a timeout's SIGALRM skips every teardown, so the exit handlers of
 * ../faults/cleanup.ts do it then.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chownSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { undoOnExit } from '../faults/cleanup.js';
import { TEST_ENV } from './processes.js';
import { freePort } from './server-process.js';
import { budgetText, scaled } from './wait.js';

const DEBIAN_ROOT = '/usr/lib/postgresql';
const TOOLS = ['initdb', 'postgres', 'pg_ctl'] as const;

/** The newest installed PostgreSQL's `bin` directory (FLEETPLANE_TEST_POSTGRES_BIN overrides), if any. */
export function postgresBin(): string | undefined {
  const chosen = process.env.FLEETPLANE_TEST_POSTGRES_BIN;
  if (chosen) return chosen;
  let versions: string[];
  try {
    versions = readdirSync(DEBIAN_ROOT).filter((name) => /^\d+$/.test(name)).sort((a, b) => Number(b) - Number(a));
  } catch {
    return undefined;
  }
  return versions.map((version) => path.join(DEBIAN_ROOT, version, 'bin')).find((bin) => TOOLS.every((tool) => existsSync(path.join(bin, tool))));
}

/** Why no server can be started here (the reason a test skips with), or undefined when one can. */
export function postgresUnavailable(): string | undefined {
  const bin = postgresBin();
  if (!bin) return `PostgreSQL is not installed (no ${DEBIAN_ROOT}/<version>/bin with ${TOOLS.join(', ')}; Debian package "postgresql")`;
  if (process.getuid?.() === 0 && !unprivilegedUser()) return 'running as root without a "postgres" user to run PostgreSQL as';
  return undefined;
}

interface Account {
  name: string;
  uid: number;
  gid: number;
}

function unprivilegedUser(): Account | undefined {
  try {
    const line = readFileSync('/etc/passwd', 'utf8').split('\n').find((entry) => entry.startsWith('postgres:'));
    const [name, , uid, gid] = line?.split(':') ?? [];
    return name && uid && gid ? { name, uid: Number(uid), gid: Number(gid) } : undefined;
  } catch {
    return undefined;
  }
}

/** argv that runs `command` as `account` (no fork in between: the pid is the command's own), or as is. */
function asUser(account: Account | undefined, command: string, args: string[]): [string, string[]] {
  if (!account) return [command, args];
  return ['setpriv', [`--reuid=${account.uid}`, `--regid=${account.gid}`, '--init-groups', '--', command, ...args]];
}

export interface PostgresServer {
  readonly host: '127.0.0.1';
  readonly port: number;
  /** The database created for the file. */
  readonly database: string;
  /** The superuser's password. */
  readonly password: string;
  /** A connection string to `database` (default: the file's database) as the superuser `postgres`. */
  url(database?: string): string;
  /** Runs one statement as the superuser, on the file's database unless `database` names another. */
  query(sql: string, values?: unknown[], database?: string): Promise<pg.QueryResult>;
  /** Stops the server (fast shutdown) and removes its directory; idempotent. */
  stop(): Promise<void>;
}

export interface StartPostgresOptions {
  database?: string;
  /** Extra `-c name=value` settings. */
  settings?: Record<string, string | number>;
  /** How long the server may take to accept connections on a quiet machine (stretched by the time scale). */
  readyBudgetMs?: number;
}

/**
 * Durability is worthless for a server that lives one test file: no fsync, no full-page writes, no synchronous
 * commit. Small memory, a few connections more than the tests open (3 processes' pools and the test's own).
 */
const TEST_SETTINGS: Record<string, string | number> = {
  fsync: 'off',
  full_page_writes: 'off',
  synchronous_commit: 'off',
  shared_buffers: '16MB',
  max_connections: 40,
  logging_collector: 'off',
};

async function connectOnce(url: string): Promise<void> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 2_000 });
  try {
    await client.connect();
    await client.query('SELECT 1');
  } finally {
    await client.end().catch(() => undefined);
  }
}

/** Starts a server (see the file's comment); the caller stops it with `stop()` in its teardown. */
export async function startPostgres(options: StartPostgresOptions = {}): Promise<PostgresServer> {
  const bin = postgresBin();
  const reason = postgresUnavailable();
  if (!bin || reason) throw new Error(reason ?? 'PostgreSQL is not installed');
  const account = process.getuid?.() === 0 ? unprivilegedUser() : undefined;
  const root = mkdtempSync(path.join(tmpdir(), 'fleetplane-pg-'));
  const data = path.join(root, 'data');
  let postmaster: ChildProcess | undefined;
  const alive = () => postmaster?.exitCode === null && postmaster.signalCode === null;
  // Synchronous, for the exit handlers: an immediate shutdown (pg_ctl waits for it), then the directory.
  const undo = undoOnExit(() => {
    if (alive()) {
      try {
        const [command, args] = asUser(account, path.join(bin, 'pg_ctl'), ['stop', '-D', data, '-m', 'immediate', '-w', '-t', '10']);
        execFileSync(command, args, { stdio: 'ignore', timeout: 15_000 });
      } catch {
        try {
          process.kill(-postmaster!.pid!, 'SIGKILL');
        } catch {
          // gone meanwhile
        }
      }
    }
    rmSync(root, { recursive: true, force: true });
  });
  try {
    const password = randomBytes(12).toString('hex');
    const passwordFile = path.join(root, 'password');
    writeFileSync(passwordFile, `${password}\n`, { mode: 0o600 });
    if (account) for (const owned of [root, passwordFile]) chownSync(owned, account.uid, account.gid);
    const [initCommand, initArgs] = asUser(account, path.join(bin, 'initdb'), [
      '-D', data, '-U', 'postgres', `--pwfile=${passwordFile}`, '--auth-local=trust', '--auth-host=scram-sha-256',
      '--encoding=UTF8', '--locale=C', '--no-sync', '--no-instructions',
    ]);
    execFileSync(initCommand, initArgs, { stdio: ['ignore', 'pipe', 'pipe'], timeout: scaled(60_000) });
    const port = await freePort();
    const settings = { ...TEST_SETTINGS, ...options.settings, listen_addresses: '127.0.0.1', port, unix_socket_directories: root };
    const [command, args] = asUser(account, path.join(bin, 'postgres'), ['-D', data, ...Object.entries(settings).flatMap(([name, value]) => ['-c', `${name}=${value}`])]);
    postmaster = spawn(command, args, { detached: true, stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, ...TEST_ENV } });
    let log = '';
    postmaster.stderr!.on('data', (chunk) => (log = (log + chunk).slice(-4_000)));
    const exited = new Promise<void>((resolve) => postmaster!.once('exit', () => resolve()));
    const base = `postgres://postgres:${password}@127.0.0.1:${port}`;
    const budgetMs = options.readyBudgetMs ?? 30_000;
    const deadline = Date.now() + scaled(budgetMs);
    for (;;) {
      if (!alive()) throw new Error(`PostgreSQL exited while starting: ${log}`);
      try {
        await connectOnce(`${base}/postgres`);
        break;
      } catch (error) {
        if (Date.now() > deadline) throw new Error(`PostgreSQL did not accept connections within ${budgetText(budgetMs)}: ${(error as Error).message}; ${log}`);
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    }
    const database = options.database ?? 'fleetplane_test';
    const query = async (sql: string, values?: unknown[], name = database) => {
      const client = new pg.Client({ connectionString: `${base}/${name}` });
      await client.connect();
      try {
        return await client.query(sql, values);
      } finally {
        await client.end().catch(() => undefined);
      }
    };
    await query(`CREATE DATABASE ${database}`, [], 'postgres');
    let stopping: Promise<void> | undefined;
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
            postmaster!.kill('SIGINT');
            const timer = setTimeout(() => postmaster!.kill('SIGKILL'), scaled(15_000));
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
