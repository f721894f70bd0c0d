import { existsSync, mkdirSync, readdirSync, realpathSync } from 'node:fs';
import path from 'node:path';
import type { LifecycleLog } from '../lifecycle/ports.js';
import type { RepositoryEntry } from './entries.js';
import { git, type GitRunner } from './git.js';

export interface CheckoutContext {
  git: GitRunner;
  env: NodeJS.ProcessEnv;
  log: Pick<LifecycleLog, 'info' | 'warn'>;
}

export type PrepareOutcome = 'cloned' | 'reused' | 'switched';

const isEmptyDirectory = (directory: string) => readdirSync(directory).length === 0;

/**
 * SPEC 14.3 at startup: clone a missing checkout; reuse an existing one as it is (no pull, no reset); switch
 * to the configured branch only when the checkout is clean and its remote is the entry's URL.
 */
export async function prepareCheckout(entry: RepositoryEntry, context: CheckoutContext): Promise<PrepareOutcome> {
  const options = { env: context.env, timeoutMs: entry.startupTimeoutMs };
  const where = { index: entry.index, url: entry.url, checkout: entry.checkout };
  if (!existsSync(entry.checkout) || isEmptyDirectory(entry.checkout)) {
    mkdirSync(path.dirname(entry.checkout), { recursive: true });
    await git(context.git, ['clone', '--branch', entry.branch, '--origin', entry.remote, '--', entry.url, entry.checkout], options);
    context.log.info({ ...where, branch: entry.branch }, 'repository cloned');
    return 'cloned';
  }
  const inCheckout = { ...options, cwd: entry.checkout };
  const top = await git(context.git, ['rev-parse', '--show-toplevel'], inCheckout);
  if (realpathSync(top) !== realpathSync(entry.checkout)) throw new Error(`${entry.checkout} exists and is not the top of a git checkout`);
  const branch = await git(context.git, ['branch', '--show-current'], inCheckout);
  if (branch === entry.branch) {
    context.log.info({ ...where, branch }, 'repository checkout reused');
    return 'reused';
  }
  const remoteUrl = await context.git(['remote', 'get-url', entry.remote], inCheckout);
  const dirty = await git(context.git, ['status', '--porcelain'], inCheckout);
  if (remoteUrl.code !== 0 || remoteUrl.stdout.trim() !== entry.url) {
    context.log.warn({ ...where, branch, wanted: entry.branch, remote: entry.remote }, 'repository branch not switched: the checkout\'s remote is not this URL');
    return 'reused';
  }
  if (dirty !== '') {
    context.log.warn({ ...where, branch, wanted: entry.branch }, 'repository branch not switched: the checkout has uncommitted changes');
    return 'reused';
  }
  await git(context.git, ['switch', entry.branch], inCheckout);
  context.log.info({ ...where, from: branch, branch: entry.branch }, 'repository branch switched');
  return 'switched';
}

/** SPEC 14.3 at shutdown: commit what changed and push the current branch, within `timeoutMs` and `signal`. */
export async function commitAndPush(entry: RepositoryEntry, context: CheckoutContext, timeoutMs: number, signal: AbortSignal, message: string): Promise<'pushed' | 'unchanged'> {
  const options = { env: context.env, timeoutMs, signal, cwd: entry.checkout };
  const branch = await git(context.git, ['branch', '--show-current'], options);
  if (!branch) throw new Error('the checkout is not on a branch (detached HEAD); nothing pushed');
  await git(context.git, ['add', '--all'], options);
  const staged = await context.git(['diff', '--cached', '--quiet'], options);
  if (staged.code === 1) await git(context.git, ['commit', '--quiet', '--no-verify', '-m', message], options);
  const ahead = await context.git(['rev-list', '--count', `${entry.remote}/${branch}..HEAD`], options);
  if (staged.code !== 1 && ahead.code === 0 && ahead.stdout.trim() === '0') return 'unchanged';
  await git(context.git, ['push', '--quiet', entry.remote, `HEAD:refs/heads/${branch}`], options);
  return 'pushed';
}
