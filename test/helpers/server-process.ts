import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import http from 'node:http';
import net from 'node:net';

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

/** Defaults that keep supervision fast in tests. */
export const FAST = {
  log: { level: 'warn' },
  restart: { backoffMs: 20, maxBackoffMs: 200, stabilityWindowMs: 500 },
  shutdown: { timeoutMs: 3000, ackTimeoutMs: 1000, sigtermDelayMs: 300, sigintDelayMs: 300, drainTimeoutMs: 3000 },
  // No readiness grace unless a test asks for one: taking the last workers out acts at once.
  lifecycle: { readinessGraceMs: 0 },
};

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

  constructor(readonly child: ChildProcess) {
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

  static async start(config: Record<string, unknown>, options: { behaviour?: string; env?: NodeJS.ProcessEnv } = {}): Promise<ServerProcess> {
    const dataDir = tempDir();
    const full = { dataDir, http: { port: 0, host: '127.0.0.1' }, ...FAST, ...config };
    const child = spawn(process.execPath, [FIXTURE], {
      detached: true,
      stdio: ['pipe', 'pipe', 'pipe'],
      env: { ...cleanEnv(), FIXTURE_CONFIG: JSON.stringify(full), FIXTURE_BEHAVIOUR: options.behaviour ?? '', ...options.env },
    });
    const server = new ServerProcess(child);
    const started = await server.waitFor((event) => event.event === 'started', 20_000);
    server.port = started.port as number;
    return server;
  }

  /** Resolves with the first event (already seen or future) matching `predicate`. */
  waitFor(predicate: (event: ServerEvent) => boolean, timeoutMs = 15_000, from = 0): Promise<ServerEvent> {
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
        reject(new Error(`timed out after ${timeoutMs} ms; last events: ${JSON.stringify(this.events.slice(-8))}`));
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

  /** Waits until `n` workers became ready since event index `from`. */
  async readyWorkers(n: number, from = 0, timeoutMs = 20_000): Promise<ServerEvent[]> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const ready = this.events.slice(from).filter((event) => event.event === 'worker:ready');
      if (ready.length >= n) return ready;
      await this.waitFor((event) => event.event === 'worker:ready', Math.max(1, deadline - Date.now()), from + this.events.slice(from).indexOf(ready.at(-1)!) + 1);
    }
  }

  async command<T = unknown>(cmd: string, args: Record<string, unknown> = {}, timeoutMs = 15_000): Promise<T> {
    const id = this.nextCommand++;
    this.child.stdin!.write(`${JSON.stringify({ id, cmd, ...args })}\n`);
    const reply = await this.waitFor((event) => event.reply === id, timeoutMs);
    if (!reply.ok) throw new Error(String(reply.error));
    return reply.result as T;
  }

  signal(signal: NodeJS.Signals): void {
    this.child.kill(signal);
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
    try {
      process.kill(-this.child.pid!, 'SIGKILL');
    } catch {
      // the group is empty
    }
  }
}

export function cleanEnv(): NodeJS.ProcessEnv {
  const env = { ...process.env };
  for (const key of Object.keys(env)) if (key.startsWith('FLEETPLANE_') || key.startsWith('TAP') || key === 'NODE_OPTIONS' || key === 'WEB_CONCURRENCY') delete env[key];
  return env;
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

/** One request on a fresh connection (no keep-alive), so each goes through the primary's hand-off. */
/** One request to 127.0.0.1; with `body`, a JSON POST (unless `method` says otherwise). */
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
    req.setTimeout(options.timeoutMs ?? 10_000, () => req.destroy(new Error('request timed out')));
    req.on('error', reject);
    req.end(text);
  });
}

/** The built `fleetplane` command (or another build's, `cli`), run to its end (killed after `timeoutMs`, 30 s). */
export function fleetplane(args: string[], { cli = CLI, timeoutMs = 30_000 }: { cli?: string; timeoutMs?: number } = {}): Promise<{ status: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [cli, ...args], { env: cleanEnv(), stdio: ['ignore', 'pipe', 'pipe'] });
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
  const child = spawn(process.execPath, [CLI, ...args], { env: { ...cleanEnv(), ...env }, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
  t.teardown(() => {
    try {
      process.kill(-child.pid!, 'SIGKILL');
    } catch {
      // already gone
    }
  });
  return child;
}
