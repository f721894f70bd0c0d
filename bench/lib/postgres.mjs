// A throwaway PostgreSQL server for a benchmark, started as test/helpers/postgres.ts starts one for a test file:
// `initdb` into a temporary directory (as the `postgres` user when run as root, which PostgreSQL refuses),
// `postgres` on 127.0.0.1 at a free port with password authentication on TCP, no durability. `stop()` (a fast
// shutdown, then the directory removed) runs on exit too, however the benchmark ends.
import { execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chownSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pg from 'pg';

const DEBIAN_ROOT = '/usr/lib/postgresql';
const TOOLS = ['initdb', 'postgres', 'pg_ctl'];

/** The newest installed PostgreSQL's `bin` directory (FLEETPLANE_TEST_POSTGRES_BIN overrides), if any. */
export function postgresBin() {
  if (process.env.FLEETPLANE_TEST_POSTGRES_BIN) return process.env.FLEETPLANE_TEST_POSTGRES_BIN;
  let versions = [];
  try {
    versions = readdirSync(DEBIAN_ROOT).filter((name) => /^\d+$/.test(name)).sort((a, b) => Number(b) - Number(a));
  } catch {
    return undefined;
  }
  return versions.map((version) => path.join(DEBIAN_ROOT, version, 'bin')).find((bin) => TOOLS.every((tool) => existsSync(path.join(bin, tool))));
}

function postgresAccount() {
  if (process.getuid?.() !== 0) return undefined;
  const line = readFileSync('/etc/passwd', 'utf8').split('\n').find((entry) => entry.startsWith('postgres:'));
  const [, , uid, gid] = line?.split(':') ?? [];
  if (!uid) throw new Error('running as root without a "postgres" user to run PostgreSQL as');
  return { uid: Number(uid), gid: Number(gid) };
}

const asUser = (account, command, args) => (account ? ['setpriv', [`--reuid=${account.uid}`, `--regid=${account.gid}`, '--init-groups', '--', command, ...args]] : [command, args]);

const freePort = () =>
  new Promise((resolve, reject) => {
    const server = net.createServer().once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });

/** Starts a server with a database `bench`; `settings` are extra `-c name=value`. */
export async function startPostgres({ settings = {}, readyBudgetMs = 30_000 } = {}) {
  const bin = postgresBin();
  if (!bin) throw new Error(`PostgreSQL is not installed (no ${DEBIAN_ROOT}/<version>/bin; Debian package "postgresql")`);
  const account = postgresAccount();
  const root = mkdtempSync(path.join(tmpdir(), 'fleetplane-bench-pg-'));
  const data = path.join(root, 'data');
  let postmaster;
  const alive = () => postmaster?.exitCode === null && postmaster.signalCode === null;
  const undo = () => {
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
  process.once('exit', undo);
  try {
    const password = randomBytes(12).toString('hex');
    const passwordFile = path.join(root, 'password');
    writeFileSync(passwordFile, `${password}\n`, { mode: 0o600 });
    if (account) for (const owned of [root, passwordFile]) chownSync(owned, account.uid, account.gid);
    const [initCommand, initArgs] = asUser(account, path.join(bin, 'initdb'), [
      '-D', data, '-U', 'postgres', `--pwfile=${passwordFile}`, '--auth-local=trust', '--auth-host=scram-sha-256', '--encoding=UTF8', '--locale=C', '--no-sync', '--no-instructions',
    ]);
    execFileSync(initCommand, initArgs, { stdio: 'ignore', timeout: 60_000 });
    const port = await freePort();
    const all = { fsync: 'off', full_page_writes: 'off', synchronous_commit: 'off', shared_buffers: '32MB', logging_collector: 'off', ...settings, listen_addresses: '127.0.0.1', port, unix_socket_directories: root };
    const [command, args] = asUser(account, path.join(bin, 'postgres'), ['-D', data, ...Object.entries(all).flatMap(([name, value]) => ['-c', `${name}=${value}`])]);
    postmaster = spawn(command, args, { detached: true, stdio: ['ignore', 'ignore', 'pipe'] });
    let log = '';
    postmaster.stderr.on('data', (chunk) => (log = (log + chunk).slice(-4_000)));
    const exited = new Promise((resolve) => postmaster.once('exit', resolve));
    const base = `postgres://postgres:${password}@127.0.0.1:${port}`;
    const query = async (sql, values, database = 'bench') => {
      const client = new pg.Client({ connectionString: `${base}/${database}`, connectionTimeoutMillis: 2_000 });
      await client.connect();
      try {
        return await client.query(sql, values);
      } finally {
        await client.end().catch(() => undefined);
      }
    };
    const deadline = Date.now() + readyBudgetMs;
    for (;;) {
      if (!alive()) throw new Error(`PostgreSQL exited while starting: ${log}`);
      try {
        await query('SELECT 1', [], 'postgres');
        break;
      } catch (error) {
        if (Date.now() > deadline) throw new Error(`PostgreSQL did not accept connections within ${readyBudgetMs} ms: ${error.message}; ${log}`);
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    }
    await query('CREATE DATABASE bench', [], 'postgres');
    return {
      port,
      url: (user = 'postgres', secret = password) => `postgres://${user}:${secret}@127.0.0.1:${port}/bench`,
      query,
      async stop() {
        if (alive()) {
          postmaster.kill('SIGINT');
          const timer = setTimeout(() => postmaster.kill('SIGKILL'), 15_000);
          await exited;
          clearTimeout(timer);
        }
        undo();
      },
    };
  } catch (error) {
    undo();
    throw error;
  }
}
