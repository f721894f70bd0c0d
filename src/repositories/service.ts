import { existsSync } from 'node:fs';
import type { LifecycleLog, NodeScope } from '../lifecycle/ports.js';
import type { SecretOpener } from '../secrets/keyring.js';
import { commitAndPush, prepareCheckout, type PrepareOutcome } from './checkout.js';
import { RepositoryCredentials } from './credentials.js';
import { clusterOf, clusterRecords } from '../inventory/records.js';
import { parseRepositories, type RepositoryEntry } from './entries.js';
import { systemGit, type GitRunner } from './git.js';

export const REPOSITORY_ROOT_ENV = 'SERVER_REPOSITORY_ROOT';
export const REPOSITORY_ORGANIZATION_ENV = 'SERVER_REPOSITORY_ORGANIZATION_ID';

export interface RepositoryServiceDeps extends NodeScope {
  projectRoot: string;
  stateDir: string;
  log: LifecycleLog;
  secrets?: SecretOpener;
  git?: GitRunner;
  baseEnv?: NodeJS.ProcessEnv;
  now?: () => number;
}

/** A prepared entry as consumers see it: where its checkout is and whether startup got it ready. */
export interface PreparedRepository extends RepositoryEntry {
  prepared?: PrepareOutcome;
}

/**
 * SPEC 14.3: `server.repository`. The primary reads its cluster's `repositories[]` once before workers fork,
 * prepares the checkouts, and at graceful shutdown checkpoints each enabled one with commit-and-push.
 */
export class RepositoryService {
  #repositories: PreparedRepository[] = [];
  readonly #credentials: RepositoryCredentials;
  readonly #git: GitRunner;

  constructor(private readonly deps: RepositoryServiceDeps) {
    this.#git = deps.git ?? systemGit;
    this.#credentials = new RepositoryCredentials({
      apis: () => deps.store.collection('apis').find({ organization_id: deps.organizationId }, { sort: { _id: 1 } }),
      secrets: deps.secrets,
      stateDir: deps.stateDir,
      baseEnv: withCommitIdentity(deps.baseEnv ?? process.env, deps.serverId),
    });
  }

  get repositories(): readonly PreparedRepository[] {
    return this.#repositories;
  }

  /** The authenticated git environment for one configured URL (credentials in it, never in argv). */
  async environment(url: string): Promise<NodeJS.ProcessEnv> {
    const entry = this.#repositories.find((candidate) => candidate.url === url);
    return this.#credentials.environment(url, entry?.api);
  }

  /** Reads the cluster document and prepares every enabled checkout; a failing entry never stops the others. */
  async prepare(): Promise<readonly PreparedRepository[]> {
    const { deps } = this;
    const cluster = await clusterRecords(deps.store).findOne(clusterOf(deps.clusterId, deps.organizationId));
    const parsed = parseRepositories(cluster?.repositories, deps.projectRoot);
    for (const refused of parsed.refused) deps.log.error({ ...refused }, 'repository entry refused');
    if (parsed.conflict) {
      deps.log.error({ reason: parsed.conflict }, 'cluster repositories refused; nothing is cloned');
      return this.#repositories;
    }
    this.#repositories = parsed.entries;
    for (const entry of this.#repositories) {
      if (!entry.enabled || entry.onStartup === false) continue;
      try {
        entry.prepared = await prepareCheckout(entry, { git: this.#git, env: await this.#credentials.environment(entry.url, entry.api), log: deps.log });
      } catch (error) {
        deps.log.error({ index: entry.index, url: entry.url, reason: (error as Error).message }, 'repository checkout failed');
      }
    }
    return this.#repositories;
  }

  /** What workers inherit: the first enabled prepared checkout and the platform organization. */
  workerEnvironment(): Record<string, string> {
    const first = this.#repositories.find((entry) => entry.enabled && entry.prepared);
    return first ? { [REPOSITORY_ROOT_ENV]: first.checkout, [REPOSITORY_ORGANIZATION_ENV]: this.deps.organizationId } : {};
  }

  /**
   * One commit-and-push per enabled entry, in order, each bounded by its `shutdownTimeoutMs` and what is left
   * of `budgetMs`; a failure is logged and the next entry still runs.
   */
  async checkpoint(budgetMs: number, reason: string): Promise<void> {
    const now = this.deps.now ?? Date.now;
    const deadline = now() + budgetMs;
    for (const entry of this.#repositories) {
      if (!entry.enabled || entry.onShutdown === false || !existsSync(entry.checkout)) continue;
      const remaining = deadline - now();
      if (remaining <= 0) {
        this.deps.log.warn({ index: entry.index, url: entry.url }, 'repository not checkpointed: the shutdown budget is spent');
        continue;
      }
      const timeoutMs = Math.min(entry.shutdownTimeoutMs, remaining);
      try {
        const env = await this.#credentials.environment(entry.url, entry.api);
        const message = `Checkpoint of ${this.deps.serverId} at shutdown (${reason})`;
        const outcome = await commitAndPush(entry, { git: this.#git, env, log: this.deps.log }, timeoutMs, AbortSignal.timeout(timeoutMs), message);
        this.deps.log.info({ index: entry.index, url: entry.url, outcome }, 'repository checkpointed');
      } catch (error) {
        this.deps.log.error({ index: entry.index, url: entry.url, reason: (error as Error).message }, 'repository checkpoint failed');
      }
    }
  }
}

/** Commits need an author; a host without a git identity gets the server's. */
function withCommitIdentity(env: NodeJS.ProcessEnv, serverId: string): NodeJS.ProcessEnv {
  const name = `Fleetplane ${serverId}`;
  const email = `${serverId}@fleetplane.invalid`;
  return {
    ...env,
    GIT_AUTHOR_NAME: env.GIT_AUTHOR_NAME ?? name,
    GIT_AUTHOR_EMAIL: env.GIT_AUTHOR_EMAIL ?? email,
    GIT_COMMITTER_NAME: env.GIT_COMMITTER_NAME ?? name,
    GIT_COMMITTER_EMAIL: env.GIT_COMMITTER_EMAIL ?? email,
  };
}
