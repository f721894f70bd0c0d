// Starting, talking to and stopping the bench fixtures. Every fixture runs in its own process group
// (`detached`), so killing the group also takes the workers it forked; `killAll` is safe to call twice.
import { execFileSync, spawn } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { MARK } from '../fixtures/protocol.mjs';

const started = new Set();

export function fixturePath(name) {
  return fileURLToPath(new URL(`../fixtures/${name}`, import.meta.url));
}

export class Fixture {
  /**
   * `execArgv`: Node flags for the fixture's own process (`--cpu-prof`, ...); `script`: the fixture's file when
   * it is not this checkout's `bench/fixtures/<name>` (another build's copy).
   */
  constructor(name, env = {}, { execArgv = [], script = fixturePath(name) } = {}) {
    this.name = name;
    this.lines = [];
    this.waiters = [];
    this.nextId = 1;
    this.child = spawn(process.execPath, [...execArgv, script], {
      env: { ...process.env, ...env },
      stdio: ['pipe', 'pipe', 'pipe'],
      detached: true,
    });
    this.pid = this.child.pid;
    started.add(this);
    this.exited = new Promise((resolve) => this.child.once('exit', (code, signal) => resolve({ code, signal })));
    this.exited.then(({ code, signal }) => {
      this.exitStatus = { code, signal };
      this.dispatch({ type: 'exit', code, signal });
    });
    this.stderr = '';
    this.child.stderr.setEncoding('utf8');
    this.child.stderr.on('data', (chunk) => {
      // Keep only the tail: enough to explain a failure.
      this.stderr = (this.stderr + chunk).slice(-8000);
    });
    let buffer = '';
    this.child.stdout.setEncoding('utf8');
    this.child.stdout.on('data', (chunk) => {
      buffer += chunk;
      let index;
      while ((index = buffer.indexOf('\n')) >= 0) {
        const line = buffer.slice(0, index);
        buffer = buffer.slice(index + 1);
        if (!line.startsWith(MARK)) continue;
        try {
          this.dispatch(JSON.parse(line.slice(MARK.length)));
        } catch {
          // not ours
        }
      }
    });
    this.child.stdin.on('error', () => {});
  }

  dispatch(message) {
    this.lines.push(message);
    for (const waiter of [...this.waiters]) {
      if (waiter.match(message)) {
        this.waiters.splice(this.waiters.indexOf(waiter), 1);
        waiter.resolve(message);
      }
    }
  }

  /** Resolves with the first message (already seen since `since`, or coming) that `match` accepts. */
  waitFor(match, timeoutMs = 20_000, since = 0) {
    const seen = this.lines.slice(since).find(match);
    if (seen) return Promise.resolve(seen);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiters.splice(this.waiters.indexOf(waiter), 1);
        reject(new Error(`${this.name}: timed out waiting (${timeoutMs} ms)\n${this.stderr}`));
      }, timeoutMs);
      const waiter = {
        match: (message) => {
          if (message.type === 'exit' && !match(message)) {
            clearTimeout(timer);
            reject(new Error(`${this.name} exited (${message.code ?? message.signal})\n${this.stderr}`));
            return false;
          }
          return match(message);
        },
        resolve: (message) => {
          clearTimeout(timer);
          resolve(message);
        },
      };
      this.waiters.push(waiter);
    });
  }

  async ready(timeoutMs = 30_000) {
    this.info = await this.waitFor((message) => message.type === 'ready' || message.type === 'error', timeoutMs);
    if (this.info.type === 'error') throw new Error(`${this.name}: ${this.info.error}\n${this.stderr}`);
    return this.info;
  }

  async command(cmd, extra = {}, timeoutMs = 20_000) {
    const id = this.nextId++;
    this.child.stdin.write(`${JSON.stringify({ id, cmd, ...extra })}\n`);
    const reply = await this.waitFor((message) => message.type === 'reply' && message.id === id, timeoutMs);
    if (!reply.ok) throw new Error(`${this.name} ${cmd}: ${reply.error}`);
    return reply.result;
  }

  signal(signal) {
    if (this.exitStatus) return;
    try {
      process.kill(this.pid, signal);
    } catch {
      // gone already
    }
  }

  killGroup(signal = 'SIGKILL') {
    try {
      process.kill(-this.pid, signal);
    } catch {
      // the group is gone
    }
  }

  /** SIGTERM to the primary (graceful), then SIGKILL to the whole group whatever happened. */
  async stop(graceMs = 15_000) {
    let graceful = false;
    if (!this.exitStatus) {
      this.signal('SIGTERM');
      const timer = new Promise((resolve) => setTimeout(resolve, graceMs).unref());
      graceful = (await Promise.race([this.exited.then(() => true), timer.then(() => false)])) === true;
    } else graceful = true;
    this.killGroup('SIGKILL');
    started.delete(this);
    return { graceful, exit: this.exitStatus ?? null };
  }
}

export function killAll() {
  for (const fixture of started) fixture.killGroup('SIGKILL');
  started.clear();
}

/** Resident set size of a process in MiB (from /proc/<pid>/status), or null when it is gone. */
export function rssMiB(pid) {
  try {
    const match = /VmRSS:\s+(\d+)\s+kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return match ? Math.round((Number(match[1]) / 1024) * 10) / 10 : null;
  } catch {
    return null;
  }
}

let clockTicks;
/** CPU time (user + system) a process has used so far, in ms, from /proc/<pid>/stat; null when it is gone. */
export function cpuMs(pid) {
  const split = cpuSplitMs(pid);
  return split && split.user + split.system;
}

/** User and system (kernel) CPU time a process has used so far, in ms; null when it is gone. */
export function cpuSplitMs(pid) {
  if (clockTicks === undefined) {
    try {
      clockTicks = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
    } catch {
      clockTicks = 100;
    }
  }
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
    return { user: (Number(fields[11]) * 1000) / clockTicks, system: (Number(fields[12]) * 1000) / clockTicks };
  } catch {
    return null;
  }
}

/**
 * CPU time a process has been running so far, in ms with ns resolution: the sum of its threads' on-CPU time
 * (/proc/<pid>/task/<tid>/schedstat), user and kernel together. /proc/<pid>/stat counts in clock ticks (10 ms),
 * too coarse for a run of a second or two. Null when the process is gone.
 */
export function cpuPreciseMs(pid) {
  try {
    let totalNs = 0;
    for (const tid of readdirSync(`/proc/${pid}/task`)) {
      try {
        totalNs += Number(readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'utf8').split(' ', 1)[0]);
      } catch {
        // the thread has just exited
      }
    }
    return totalNs / 1e6;
  } catch {
    return null;
  }
}
