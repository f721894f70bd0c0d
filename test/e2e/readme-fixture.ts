import { spawn, type ChildProcess } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, readdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { Test } from 'tap';
import { CLI, cleanEnv, freePort, tempDir } from '../helpers/server-process.js';
import { until as waitUntil } from '../helpers/wait.js';

export const ROOT = path.resolve(import.meta.dirname, '..', '..');
/**
 * The shell blocks of the section under `heading` (up to the next heading of its level or higher) of `file` (the
 * README or a page of docs/, relative to the repository), as a reader copies them: fenced `sh`/`bash` blocks,
 * dedented by their fence's indentation (blocks inside a list).
 */
export function blocksOf(file: string, heading: string): string[] {
  const lines = readFileSync(path.join(ROOT, file), 'utf8').split('\n');
  const level = /^#+/.exec(heading)![0].length;
  const first = lines.indexOf(heading);
  if (first < 0) throw new Error(`${file} has no heading "${heading}"`);
  const blocks: string[] = [];
  let fence: { indent: number; shell: boolean; lines: string[] } | undefined;
  for (const line of lines.slice(first + 1)) {
    const marker = /^( *)```(\w*)$/.exec(line);
    if (!fence) {
      // A heading of this level or higher ends the section; a `#` inside a block is a shell comment.
      if (new RegExp(`^#{1,${level}} `).test(line)) break;
      if (marker) fence = { indent: marker[1]!.length, shell: ['sh', 'bash'].includes(marker[2]!), lines: [] };
    } else if (marker && marker[1]!.length === fence.indent && marker[2] === '') {
      if (fence.shell) blocks.push(fence.lines.join('\n'));
      fence = undefined;
    } else {
      fence.lines.push(line.slice(Math.min(fence.indent, line.length - line.trimStart().length)));
    }
  }
  if (blocks.length === 0) throw new Error(`${file} section "${heading}" has no shell block`);
  return blocks;
}

/**
 * The example replies a block shows as comments, `# {"status":"ready",…}` after a command or on a line of its
 * own: every comment that is a JSON object or array, as a pattern for what the command prints on one line, where
 * `…` stands for anything (a `curl -s` reply ends without a newline, so the next output may follow on its line).
 */
export function exampleReplies(block: string): Array<{ example: string; pattern: RegExp }> {
  return [...block.matchAll(/(?:^|\s)# ([{[].*)$/gm)].map(([, example]) => {
    const text = example!.trimEnd();
    const source = text.split('…').map((part) => part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')).join('[^\\n]*');
    return { example: text, pattern: new RegExp(source) };
  });
}

/** Every example reply of `block` is in what running it printed; answers how many the block shows. */
export function matchExampleReplies(t: Test, block: string, printed: string): number {
  const examples = exampleReplies(block);
  for (const { example, pattern } of examples) t.match(printed, pattern, `the example reply ${example} is what the block printed`);
  return examples.length;
}

/** A working directory where `npx fleetplane` is this build, as it is for a user who installed the package. */
export function workingDirectory(): string {
  const cwd = tempDir('fleetplane-readme-');
  const bin = path.join(cwd, 'node_modules', '.bin', 'fleetplane');
  mkdirSync(path.dirname(bin), { recursive: true });
  writeFileSync(bin, `#!/bin/sh\nexec ${JSON.stringify(process.execPath)} ${JSON.stringify(CLI)} "$@"\n`, { mode: 0o755 });
  return cwd;
}

/**
 * A clone's working directory, as the first ten minutes start in one: this checkout's files linked in (already
 * installed and built), `examples/` copied so that its fixed upstream port can be substituted, and `data/` fresh.
 */
export function cloneDirectory(substitute: (text: string) => string): string {
  const cwd = tempDir('fleetplane-clone-');
  for (const entry of readdirSync(ROOT)) {
    if (['.git', '.tap', 'data', 'examples'].includes(entry)) continue;
    symlinkSync(path.join(ROOT, entry), path.join(cwd, entry));
  }
  cpSync(path.join(ROOT, 'examples'), path.join(cwd, 'examples'), { recursive: true });
  for (const file of readdirSync(path.join(cwd, 'examples'))) {
    const full = path.join(cwd, 'examples', file);
    writeFileSync(full, substitute(readFileSync(full, 'utf8')));
  }
  return cwd;
}

/** Free ports for the fixed ones a recipe names, and the text with them replaced. */
export async function portMap(fixed: number[]): Promise<{ port: (fixed: number) => number; substitute: (text: string) => string }> {
  const ports = new Map<number, number>();
  for (const port of fixed) ports.set(port, await freePort());
  const pattern = new RegExp(`(?<![\\d.])(${fixed.join('|')})(?!\\d)`, 'g');
  return { port: (port) => ports.get(port)!, substitute: (text) => text.replace(pattern, (match) => String(ports.get(Number(match)))) };
}

/** The suite's wait (stretched by the time scale like every budget), where a probe's `false` means "not yet" too. */
export const until = <T>(what: string, probe: () => Promise<T | undefined | false> | T | undefined | false, timeoutMs = 90_000): Promise<T> =>
  waitUntil(
    what,
    async () => {
      const value = await probe();
      return value === false ? undefined : value;
    },
    timeoutMs,
    { everyMs: 200 },
  );

/**
 * The environment the recipes run in: the user's, without FLEETPLANE_* settings, one worker per server, and a
 * worker boot budget for a machine shared with other test files (a worker boots in a second or two when the
 * machine is not busy; the default budget, 30 s, is for a worker that will never be ready).
 */
export const recipeEnv = (extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv => ({ ...cleanEnv(), WEB_CONCURRENCY: '1', FLEETPLANE_WORKERS_READY_TIMEOUT_MS: '180000', ...extra });

/**
 * A first terminal: a block run in the foreground of its own process group, as a terminal runs it, with what it
 * prints kept. `interrupt()` is Ctrl-C (SIGINT to the group); teardown kills the group whatever happened.
 */
export class Foreground {
  readonly child: ChildProcess;
  output = '';
  readonly exited: Promise<number | null>;

  constructor(t: Test, readonly script: string, options: { cwd: string; env?: NodeJS.ProcessEnv }) {
    this.child = spawn('bash', ['-c', script], { cwd: options.cwd, env: options.env ?? recipeEnv(), detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
    this.child.stdout!.on('data', (chunk) => (this.output += chunk));
    this.child.stderr!.on('data', (chunk) => (this.output += chunk));
    this.exited = new Promise((resolve) => this.child.once('exit', (code) => resolve(code)));
    t.teardown(() => this.kill());
  }

  interrupt(): void {
    this.signal('SIGINT');
  }

  /**
   * Ctrl-C, then waits until every process of the group is gone: `npx` may exit on the signal before the server
   * it started has finished its graceful shutdown.
   */
  async stop(timeoutMs = 90_000): Promise<void> {
    this.interrupt();
    await until(`the processes of "${this.script.split('\n').at(-1)}" to exit`, () => {
      try {
        process.kill(-this.child.pid!, 0);
        return false;
      } catch {
        return true;
      }
    }, timeoutMs);
  }

  kill(): void {
    this.signal('SIGKILL');
  }

  private signal(signal: NodeJS.Signals): void {
    try {
      process.kill(-this.child.pid!, signal);
    } catch {
      // the group is gone
    }
  }

  /** Waits until the output matches, or fails with what was printed. */
  async waitFor(pattern: RegExp, timeoutMs = 90_000): Promise<RegExpMatchArray> {
    return until(`${pattern} in:\n${this.output}`, () => pattern.exec(this.output) ?? undefined, timeoutMs);
  }
}

/**
 * A second terminal: one bash session that runs block after block, so that the variables one block sets are
 * there for the next, as they are for a reader typing them. `run` answers what the block printed.
 */
export class Session {
  private readonly shell: ChildProcess;
  private output = '';
  private count = 0;

  constructor(t: Test, options: { cwd: string; env?: NodeJS.ProcessEnv }) {
    this.shell = spawn('bash', [], { cwd: options.cwd, env: options.env ?? recipeEnv(), detached: true, stdio: ['pipe', 'pipe', 'pipe'] });
    this.shell.stdout!.on('data', (chunk) => (this.output += chunk));
    this.shell.stderr!.on('data', (chunk) => (this.output += chunk));
    t.teardown(() => {
      try {
        process.kill(-this.shell.pid!, 'SIGKILL');
      } catch {
        // gone
      }
    });
  }

  async run(block: string, timeoutMs = 120_000): Promise<string> {
    const marker = `__block_${++this.count}_done__`;
    const from = this.output.length;
    this.shell.stdin!.write(`${block}\necho ${marker}\n`);
    await until(`the block to finish:\n${block}\n--- printed:\n${this.output.slice(from)}`, () => this.output.includes(`${marker}\n`), timeoutMs);
    return this.output.slice(from, this.output.indexOf(marker, from));
  }
}

/** Kills what the built-in local provider started under `root` (its servers run in their own process groups). */
export function killLocalServers(root: string): void {
  if (!existsSync(root)) return;
  for (const entry of readdirSync(root)) {
    const file = path.join(root, entry, 'instance.json');
    if (!existsSync(file)) continue;
    try {
      process.kill(-(JSON.parse(readFileSync(file, 'utf8')) as { pid: number }).pid, 'SIGKILL');
    } catch {
      // gone
    }
  }
}
