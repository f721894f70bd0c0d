import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import http from 'node:http';
import net from 'node:net';
import { TEST_ENV, killOwned, own } from './processes.js';
import { budgetText, scaled } from './wait.js';

export const FIXTURE = path.resolve(import.meta.dirname, '..', 'fixtures', 'server.mjs');
export const CLI = path.resolve(import.meta.dirname, '..', '..', 'dist', 'cli', 'main.js');

export interface ServerEvent {
  event?: string;
  reply?: number;
  [key: string]: unknown;
}

export const tempDir = (prefix = 'fleetplane-test-') => mkdtempSync(path.join(tmpdir(), prefix));

/** A port free on 127.0.0.1 right now, for a process that must be told its port before it starts. */
export async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/**
 * Defaults that keep supervision fast in tests. The shutdown budgets are stretched by the time scale: a graceful
 * stop of a busy machine's server must not be escalated as if it hung.
 */
export const FAST = {
  log: { level: 'warn' },
  restart: { backoffMs: 20, maxBackoffMs: 200, stabilityWindowMs: 500 },
  shutdown: { timeoutMs: scaled(3000), ackTimeoutMs: scaled(1000), sigtermDelayMs: 300, sigintDelayMs: 300, drainTimeoutMs: scaled(3000) },
  // No readiness grace unless a test asks for one: taking the last workers out acts at once.
  lifecycle: { readinessGraceMs: 0 },
};

/**
 * `config` with the product's timeouts a test does not mean to hit stretched by the time scale, unless the test
 * set them itself: how long a worker may take to be ready, how long request() waits for replies, how long a
 * request to the parent may take. On a busy machine these would otherwise fire before the test's own waits.
 */
export function withBudgets(config: Record<string, any>): Record<string, any> {
  const workers = config.workers === undefined ? {} : typeof config.workers === 'object' ? config.workers : { count: config.workers };
  return {
    ...config,
    workers: { readyTimeoutMs: scaled(30_000), ...workers },
    ipc: { requestTimeoutMs: scaled(5_000), ...config.ipc },
    manager: { timeoutMs: scaled(3_000), ...config.manager },
  };
}

/**
 * A Fleetplane server in its own process group, with its event stream. `stop()` kills the whole group,
 * so no worker outlives a test even when the test fails half-way.
 */
export class ServerProcess {
  readonly events: ServerEvent[] = [];
  readonly stderr: string[] = [];
  port = 0;
  exitCode: number | null | undefined = undefined;
  readonly exited: Promise<number | null>;
  private readonly waiters = new Set<() => void>();
  private nextCommand = 1;

  /** `child` leads its own process group (spawned `detached`); it is owned for teardown from here on. */
  constructor(readonly child: ChildProcess) {
    own(child, { group: true });
    createInterface({ input: child.stdout! }).on('line', (line) => {
      try {
        this.events.push(JSON.parse(line) as ServerEvent);
      } catch {
        this.events.push({ log: line });
      }
      for (const wake of this.waiters) wake();
    });
    createInterface({ input: child.stderr! }).on('line', (line) => this.stderr.push(line));
    this.exited = new Promise((resolve) =>
      child.once('exit', (code) => {
        this.exitCode = code;
        for (const wake of this.waiters) wake();
        resolve(code);
      }),
    );
  }

  /**
   * Spawns a fixture server (test/fixtures/*.mjs) in its own process group with `config` (FIXTURE_CONFIG, the
   * product's timeouts stretched by `withBudgets`); does not wait for it to start.
   */
  static spawn(fixture: string, config: Record<string, unknown>, env: NodeJS.ProcessEnv = {}): ServerProcess {
    const child = spawn(process.execPath, [fixture], {
      detached: true,
      stdio: ['pipe', 'pipe', 'pipe'],
      env: { ...cleanEnv(), ...env, FIXTURE_CONFIG: JSON.stringify(withBudgets(config)) },
    });
    return new ServerProcess(child);
  }

  /** Waits for the fixture's `started` event and takes its port; a server that does not start is killed. */
  async started(budgetMs = 20_000): Promise<ServerEvent> {
    try {
      const event = await this.waitFor((candidate) => candidate.event === 'started', budgetMs);
      this.port = event.port as number;
      return event;
    } catch (error) {
      await this.stop();
      throw error;
    }
  }

  static async start(config: Record<string, unknown>, options: { behaviour?: string; env?: NodeJS.ProcessEnv } = {}): Promise<ServerProcess> {
    const full = { dataDir: tempDir(), http: { port: 0, host: '127.0.0.1' }, ...FAST, ...config };
    const server = ServerProcess.spawn(FIXTURE, full, { FIXTURE_BEHAVIOUR: options.behaviour ?? '', ...options.env });
    await server.started();
    return server;
  }

  /**
   * Resolves with the first event (already seen or future, from index `from`) matching `predicate`. `budgetMs`
   * is the quiet machine's figure, stretched by the time scale; a timeout names the predicate and the last events.
   */
  waitFor(predicate: (event: ServerEvent) => boolean, budgetMs = 15_000, from = 0): Promise<ServerEvent> {
    const timeoutMs = scaled(budgetMs);
    return new Promise((resolve, reject) => {
      const check = () => {
        const found = this.events.slice(from).find(predicate);
        if (found) {
          finish();
          resolve(found);
        } else if (this.exitCode !== undefined) {
          finish();
          reject(new Error(`server exited (${this.exitCode}) before the awaited event; stderr: ${this.stderr.slice(-5).join(' | ')}`));
        }
      };
      const timer = setTimeout(() => {
        finish();
        reject(new Error(`timed out after ${budgetText(budgetMs)} waiting for ${String(predicate).slice(0, 300)}; last events: ${JSON.stringify(this.events.slice(-8))}`));
      }, timeoutMs);
      const finish = () => {
        clearTimeout(timer);
        this.waiters.delete(check);
      };
      this.waiters.add(check);
      check();
    });
  }

  count(predicate: (event: ServerEvent) => boolean): number {
    return this.events.filter(predicate).length;
  }

  /** Waits until `n` workers became ready since event index `from` (a budget as in `waitFor`). */
  async readyWorkers(n: number, from = 0, budgetMs = 20_000): Promise<ServerEvent[]> {
    const ready = () => this.events.slice(from).filter((event) => event.event === 'worker:ready');
    try {
      await this.waitFor(() => ready().length >= n, budgetMs, from);
    } catch (error) {
      throw new Error(`${n} workers ready: ${ready().length} are. ${(error as Error).message}`);
    }
    return ready();
  }

  /** Sends the fixture a command and resolves with its result (a budget as in `waitFor`). */
  async command<T = unknown>(cmd: string, args: Record<string, unknown> = {}, budgetMs = 15_000): Promise<T> {
    const id = this.nextCommand++;
    this.child.stdin!.write(`${JSON.stringify({ id, cmd, ...args })}\n`);
    const reply = await this.waitFor((event) => event.reply === id, budgetMs);
    if (!reply.ok) throw new Error(String(reply.error));
    return reply.result as T;
  }

  signal(signal: NodeJS.Signals): void {
    this.child.kill(signal);
  }

  /** Resolves with the exit code; a server still running after the budget (as in `waitFor`) fails the wait, naming its last events. */
  async exit(budgetMs = 30_000): Promise<number | null> {
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`still running after ${budgetText(budgetMs)}; last events: ${JSON.stringify(this.events.slice(-8))}; stderr: ${this.stderr.slice(-5).join(' | ')}`)), scaled(budgetMs));
    });
    try {
      return await Promise.race([this.exited, late]);
    } finally {
      clearTimeout(timer);
    }
  }

  /** Kills the whole process group; safe to call twice. */
  async stop(): Promise<void> {
    if (this.exitCode === undefined) {
      try {
        process.kill(-this.child.pid!, 'SIGKILL');
      } catch {
        // already gone
      }
      await this.exited;
    }
    // Workers the leader left behind: the group is killed once more, then forgotten.
    killOwned(this.child);
  }
}

/**
 * This environment without Fleetplane's, tap's (TAP*, and _TAPJS_* of its process tracker) and Node's own
 * variables, with the run's mark and time scale.
 */
export function cleanEnv(): NodeJS.ProcessEnv {
  const env = { ...process.env };
  const foreign = (key: string) => key.startsWith('FLEETPLANE_') || key.startsWith('TAP') || key.startsWith('_TAPJS_') || key === 'NODE_OPTIONS' || key === 'WEB_CONCURRENCY';
  for (const key of Object.keys(env)) if (foreign(key)) delete env[key];
  return { ...env, ...TEST_ENV };
}

export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

export interface Reply {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: string;
  json(): any;
}

/**
 * One request to 127.0.0.1 on a fresh connection (no keep-alive, unless `agent` says otherwise), so each goes
 * through the primary's hand-off; with `body`, a JSON POST (unless `method` says otherwise). `timeoutMs` is a
 * budget as in `waitFor`.
 */
export function request(port: number, pathname: string, options: { method?: string; agent?: http.Agent; timeoutMs?: number; host?: string; body?: unknown; key?: string } = {}): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const text = options.body === undefined ? undefined : JSON.stringify(options.body);
    const headers: http.OutgoingHttpHeaders = options.host ? { host: options.host } : {};
    if (options.key) headers.authorization = `Bearer ${options.key}`;
    if (text !== undefined) Object.assign(headers, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
    const req = http.request(
      { host: '127.0.0.1', port, path: pathname, method: options.method ?? (text === undefined ? 'GET' : 'POST'), agent: options.agent ?? false, headers },
      (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (chunk) => (body += chunk));
        res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body, json: () => JSON.parse(body) }));
        res.on('error', reject);
      },
    );
    const budgetMs = options.timeoutMs ?? 10_000;
    req.setTimeout(scaled(budgetMs), () => req.destroy(new Error(`${pathname}: no answer within ${budgetText(budgetMs)}`)));
    req.on('error', reject);
    req.end(text);
  });
}

/** The built `fleetplane` command (or another build's, `cli`), run to its end (killed after `timeoutMs`, 30 s scaled). */
export function fleetplane(args: string[], { cli = CLI, timeoutMs = scaled(30_000) }: { cli?: string; timeoutMs?: number } = {}): Promise<{ status: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = own(spawn(process.execPath, [cli, ...args], { env: cleanEnv(), stdio: ['ignore', 'pipe', 'pipe'] }), { group: false });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk) => (stdout += chunk));
    child.stderr.on('data', (chunk) => (stderr += chunk));
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.on('exit', (status) => {
      clearTimeout(timer);
      resolve({ status, stdout, stderr });
    });
  });
}

/** Steady load over keep-alive connections until stopped; counts every failed request. */
export function steadyLoad(port: number, pathname = '/whoami', connections = 8) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: connections });
  let running = true;
  const stats = { ok: 0, failed: 0, errors: [] as string[], workers: new Set<number>() };
  const loop = async () => {
    while (running) {
      try {
        const reply = await request(port, pathname, { agent });
        if (reply.status === 200) {
          stats.ok++;
          stats.workers.add(reply.json().pid);
        } else {
          stats.failed++;
          stats.errors.push(`status ${reply.status}`);
        }
      } catch (error) {
        stats.failed++;
        stats.errors.push((error as Error).message);
      }
    }
  };
  const loops = Array.from({ length: connections }, loop);
  return {
    stats,
    async stop() {
      running = false;
      await Promise.all(loops);
      agent.destroy();
      return stats;
    },
  };
}

/** `fleetplane <args>` from the build, in its own process group, killed with the test if still running. */
export function startCli(t: { teardown(fn: () => void): void }, args: string[], env: NodeJS.ProcessEnv = {}): ChildProcess {
  const child = own(spawn(process.execPath, [CLI, ...args], { env: { ...cleanEnv(), ...env }, detached: true, stdio: ['ignore', 'pipe', 'pipe'] }), { group: true });
  t.teardown(() => killOwned(child));
  return child;
}
