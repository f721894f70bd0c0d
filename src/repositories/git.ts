import { spawn } from 'node:child_process';

export interface GitResult {
  code: number;
  stdout: string;
  stderr: string;
}

export interface GitRunOptions {
  cwd?: string;
  env: NodeJS.ProcessEnv;
  timeoutMs: number;
  /** Cuts the command (the shutdown budget ran out). */
  signal?: AbortSignal;
}

/** How repositories run git; tests may pass a wrapper that records calls. */
export type GitRunner = (args: readonly string[], options: GitRunOptions) => Promise<GitResult>;

export class GitError extends Error {
  override readonly name = 'GitError';
  constructor(message: string, readonly result?: GitResult) {
    super(message);
  }
}

const MAX_OUTPUT_CHARS = 64 * 1024;

/**
 * Runs a command in its own process group with a deadline. A push hangs in its helpers (ssh, the remote
 * side of a local push, a hook), not in git itself: the whole group is killed, so nothing outlives the cut.
 */
export function runCommand(file: string, args: readonly string[], options: GitRunOptions): Promise<GitResult> {
  return new Promise((resolve, reject) => {
    if (options.signal?.aborted) {
      reject(new GitError(`${file} not started: the shutdown budget is spent`));
      return;
    }
    const child = spawn(file, args, { cwd: options.cwd, env: options.env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    let cut: string | undefined;
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout = (stdout + chunk).slice(-MAX_OUTPUT_CHARS)));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr = (stderr + chunk).slice(-MAX_OUTPUT_CHARS)));
    const killGroup = (why: string) => {
      cut ??= why;
      try {
        if (child.pid) process.kill(-child.pid, 'SIGKILL');
      } catch {
        // Already gone.
      }
    };
    const timer = setTimeout(() => killGroup(`timed out after ${options.timeoutMs} ms`), options.timeoutMs);
    timer.unref();
    const onAbort = () => killGroup('cut: the shutdown budget is spent');
    options.signal?.addEventListener('abort', onAbort, { once: true });
    child.once('error', (error) => {
      clearTimeout(timer);
      options.signal?.removeEventListener('abort', onAbort);
      reject(new GitError(`${file} could not start: ${(error as NodeJS.ErrnoException).code ?? error.message}`));
    });
    child.once('close', (code, signal) => {
      clearTimeout(timer);
      options.signal?.removeEventListener('abort', onAbort);
      const result = { code: code ?? -1, stdout, stderr };
      if (cut) reject(new GitError(`${file} ${args[0] ?? ''} ${cut}`, result));
      else resolve({ ...result, code: code ?? (signal ? 128 : -1) });
    });
  });
}

export const systemGit: GitRunner = (args, options) => runCommand('git', args, options);

/** git, failing with the command's first stderr line (never its arguments, which name paths only anyway). */
export async function git(runner: GitRunner, args: readonly string[], options: GitRunOptions): Promise<string> {
  const result = await runner(args, options);
  if (result.code !== 0) {
    const line = result.stderr.trim().split('\n').find(Boolean) ?? `exit code ${result.code}`;
    throw new GitError(`git ${args[0]}: ${line}`, result);
  }
  return result.stdout.trim();
}
