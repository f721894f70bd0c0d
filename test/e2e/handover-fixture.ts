import { spawn, type ChildProcess } from 'node:child_process';
import { cpSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { FAST, cleanEnv, fleetplane, isAlive, request, tempDir } from '../helpers/server-process.js';

const ROOT = path.resolve(import.meta.dirname, '..', '..');

/**
 * A deployment of this build in a directory of its own (dist/, package.json, node_modules linked), as an
 * operator's install would be: the code a hand-over starts is whatever is on disk there at that moment.
 */
export class Deployment {
  readonly root = tempDir('fleetplane-deploy-');
  readonly cli = path.join(this.root, 'dist', 'cli', 'main.js');
  private readonly originals = new Map<string, string>();

  constructor(version: string) {
    cpSync(path.join(ROOT, 'dist'), path.join(this.root, 'dist'), { recursive: true });
    symlinkSync(path.join(ROOT, 'node_modules'), path.join(this.root, 'node_modules'));
    this.setVersion(version);
  }

  /** Deploys "another version": the version string is read from package.json when a process loads its code. */
  setVersion(version: string): void {
    const manifest = JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as Record<string, unknown>;
    writeFileSync(path.join(this.root, 'package.json'), JSON.stringify({ ...manifest, version }));
  }

  /** Replaces a built file (e.g. `dist/cli/start.js`) by a broken one; `restore` puts it back. */
  patch(file: string, change: (text: string) => string): void {
    const full = path.join(this.root, file);
    const text = this.originals.get(file) ?? readFileSync(full, 'utf8');
    this.originals.set(file, text);
    writeFileSync(full, change(text));
  }

  restore(file: string): void {
    const text = this.originals.get(file);
    if (text !== undefined) writeFileSync(path.join(this.root, file), text);
  }
}

export interface LogLine {
  pid: number;
  worker: number;
  msg: string;
  [field: string]: unknown;
}

/**
 * `fleetplane start` of a deployment, in its own process group, its pino log read line by line. Every primary
 * that writes to that log (the first one, and those a hand-over started, which share its stdout) is tracked,
 * and `stop()` kills each one's process group: a primary started by a hand-over leads a group of its own.
 */
export class CliNode {
  readonly lines: LogLine[] = [];
  readonly stderr: string[] = [];
  readonly primaries = new Set<number>();
  port = 0;
  private readonly waiters = new Set<() => void>();

  private constructor(
    readonly child: ChildProcess,
    readonly dataDir: string,
    readonly configFile: string,
    /** In a PID namespace of its own the log's pids are not this host's: only the wrapper's group is killed. */
    hostPids: boolean,
  ) {
    this.primaries.add(child.pid!);
    createInterface({ input: child.stdout! }).on('line', (line) => {
      try {
        const record = JSON.parse(line) as LogLine;
        // A primary a hand-over starts is named by the old one before it forks anything.
        if (hostPids && typeof record.successor === 'number') this.primaries.add(record.successor);
        if (hostPids && record.msg === 'fleetplane started') this.primaries.add(record.pid);
        this.lines.push(record);
      } catch {
        // the start message of auto-initialization, not a log line
      }
      for (const wake of this.waiters) wake();
    });
    createInterface({ input: child.stderr! }).on('line', (line) => this.stderr.push(line));
  }

  /** `wrap`: a command the node runs under (an init in a PID namespace of its own). */
  static async start(cli: string, config: Record<string, unknown>, wrap: string[] = []): Promise<CliNode> {
    const dataDir = (config.dataDir as string | undefined) ?? tempDir();
    const configFile = path.join(tempDir('fleetplane-config-'), 'fleetplane.config.json');
    // A generous worker boot budget: the host may be busy, and a hand-over waits for it twice.
    const workers = { readyTimeoutMs: 90_000, ...(config.workers as object) };
    writeFileSync(configFile, JSON.stringify({ ...FAST, log: { level: 'info' }, http: { port: 0, host: '127.0.0.1' }, dataDir, ...config, workers }));
    const argv = [process.execPath, cli, 'start', '--config', configFile];
    const [command, ...args] = [...wrap, ...argv];
    const child = spawn(command!, args, { env: cleanEnv(), detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
    const node = new CliNode(child, dataDir, configFile, wrap.length === 0);
    const started = await node.waitForLog((line) => line.msg === 'fleetplane started', 120_000);
    node.port = (started.ports as { http: number }).http;
    return node;
  }

  /** Resolves with the first log line since `from` that matches. */
  waitForLog(match: (line: LogLine) => boolean, timeoutMs = 60_000, from = 0): Promise<LogLine> {
    return new Promise((resolve, reject) => {
      const check = () => {
        const found = this.lines.slice(from).find(match);
        if (!found) return;
        finish();
        resolve(found);
      };
      const timer = setTimeout(() => {
        finish();
        reject(new Error(`no such log line in ${timeoutMs} ms; last: ${JSON.stringify(this.lines.slice(-5).map((line) => line.msg))}; stderr: ${this.stderr.slice(-3).join(' | ')}`));
      }, timeoutMs);
      const finish = () => {
        clearTimeout(timer);
        this.waiters.delete(check);
      };
      this.waiters.add(check);
      check();
    });
  }

  /** Waits until `n` workers were logged ready since line `from` (the record's `pid` is the worker's). */
  async readyWorkers(n: number, from = 0, timeoutMs = 150_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    const ready = () => this.lines.slice(from).filter((line) => line.msg === 'worker ready').length;
    while (ready() < n) await this.waitForLog((line) => line.msg === 'worker ready', Math.max(1, deadline - Date.now()), this.lines.length);
  }

  count(match: (line: LogLine) => boolean): number {
    return this.lines.filter(match).length;
  }

  signal(pid: number, signal: NodeJS.Signals): void {
    process.kill(pid, signal);
  }

  async stop(): Promise<void> {
    for (const pid of this.primaries) {
      try {
        process.kill(-pid, 'SIGKILL');
      } catch {
        // that group is gone
      }
    }
    const deadline = Date.now() + 10_000;
    while ([...this.primaries].some(isAlive) && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** A CLI command run to its end (killed after 150 s: a hand-over may take two worker boots on a busy host). */
export const run = (cli: string, args: string[]) => fleetplane(args, { cli, timeoutMs: 150_000 });

/**
 * Bounded steady load until stopped: `keepAlive` loops on keep-alive connections and `fresh` loops that open a
 * new connection per request, each pausing `pauseMs` between requests. Any error or non-200 is a failure.
 */
export function boundedLoad(port: number, pathname = '/healthz', { keepAlive = 4, fresh = 2, pauseMs = 10 } = {}) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: keepAlive });
  const stats = { ok: 0, failed: 0, errors: [] as string[], versions: new Set<string>() };
  let running = true;
  const loop = async (useAgent: boolean) => {
    while (running) {
      try {
        const reply = await request(port, pathname, { agent: useAgent ? agent : undefined, timeoutMs: 20_000 });
        if (reply.status === 200) {
          stats.ok++;
          stats.versions.add(String(reply.json().version));
        } else {
          stats.failed++;
          stats.errors.push(`status ${reply.status}`);
        }
      } catch (error) {
        stats.failed++;
        stats.errors.push((error as Error).message);
      }
      await new Promise((resolve) => setTimeout(resolve, pauseMs));
    }
  };
  const loops = [...Array.from({ length: keepAlive }, () => loop(true)), ...Array.from({ length: fresh }, () => loop(false))];
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

/** Polls `probe` until it returns a value (not undefined), or fails after `timeoutMs`. */
export async function eventually<T>(probe: () => Promise<T | undefined>, what: string, timeoutMs = 60_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  while (Date.now() < deadline) {
    try {
      const value = await probe();
      if (value !== undefined) return value;
    } catch (error) {
      last = error;
    }
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  throw new Error(`${what}: not reached in ${timeoutMs} ms${last ? ` (${(last as Error).message})` : ''}`);
}
