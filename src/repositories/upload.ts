import type { LifecycleLog, NodeScope } from '../lifecycle/ports.js';
import { clusterOf, clusterRecords } from '../inventory/records.js';
import type { RepositoryEntry } from './entries.js';
import { GitError, runCommand } from './git.js';
import { claimUpload, releaseUpload, type ReservationKey } from './reservations.js';

export interface InitialUploadDeps extends NodeScope {
  /** argv of the upload, run in the checkout without a shell; undefined = uploads are not configured. */
  command: readonly string[] | undefined;
  timeoutMs: number;
  /** The command's environment (the node credential among it, never in argv). */
  env: NodeJS.ProcessEnv;
  log: LifecycleLog;
  now?: () => Date;
  /**
   * Told once of each completion recorded in the cluster document, to mirror it to the parent manager when the
   * node is managed (`Manager.mirrorUploadCompletion`: never awaited, its failure logged there).
   */
  mirror?: (patch: { cluster_id: string; url: string; index: number; completedAt: string }) => void;
}

type Outcome = 'completed' | 'failed' | 'reserved-elsewhere' | 'uncertain' | 'skipped';

/**
 * SPEC 14.3: the one-time initial upload of each repository that asks for it. A reservation record keyed by
 * cluster + URL lets exactly one node run it; success is recorded in the cluster document before the
 * reservation goes. A failure releases it for a later start; a crash, or a success that could not be
 * recorded, leaves it for an operator (`fleetplane ctl`), never for a lease that would run the upload twice.
 */
export class InitialUpload {
  #run: Promise<Map<string, Outcome>> | undefined;
  readonly #abort = new AbortController();

  constructor(private readonly deps: InitialUploadDeps) {}

  /** Runs once per process: repeated readiness shares the first run. */
  publish(entries: readonly RepositoryEntry[]): Promise<Map<string, Outcome>> {
    this.#run ??= this.#publish(entries);
    return this.#run;
  }

  /** Cuts an upload in flight and waits for it at most `budgetMs` (shutdown does this before git checkpoints). */
  async abort(budgetMs: number): Promise<void> {
    this.#abort.abort();
    if (!this.#run) return;
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([this.#run.catch(() => undefined), new Promise((resolve) => (timer = setTimeout(resolve, Math.max(0, budgetMs))))]);
    clearTimeout(timer);
  }

  async #publish(entries: readonly RepositoryEntry[]): Promise<Map<string, Outcome>> {
    const outcomes = new Map<string, Outcome>();
    for (const entry of entries) {
      if (!entry.enabled || !entry.initialUpload.enabled || entry.initialUpload.completed) continue;
      if (!this.deps.command) {
        this.deps.log.warn({ index: entry.index, url: entry.url }, 'an initial upload is pending but repositories.uploadCommand is not configured');
        outcomes.set(entry.url, 'skipped');
        continue;
      }
      if (this.#abort.signal.aborted) break;
      outcomes.set(entry.url, await this.#uploadOne(entry).catch((error: unknown) => {
        this.deps.log.error({ url: entry.url, reason: (error as Error).message }, 'the initial upload could not be reserved or recorded');
        return 'uncertain' as const;
      }));
    }
    return outcomes;
  }

  async #uploadOne(entry: RepositoryEntry): Promise<Outcome> {
    const { deps } = this;
    const key: ReservationKey = { organizationId: deps.organizationId, clusterId: deps.clusterId, url: entry.url };
    if (!(await claimUpload(deps.store, key, deps.serverId, this.now()))) {
      deps.log.info({ url: entry.url }, 'the initial upload is reserved by another node (or awaits reconciliation); not run here');
      return 'reserved-elsewhere';
    }
    // Another node may have completed it between this node's startup read and its claim.
    if ((await this.#entryIndex(entry.url)).completed) {
      await releaseUpload(deps.store, key, deps.serverId);
      deps.log.info({ url: entry.url }, 'the initial upload was completed by another node; not run here');
      return 'skipped';
    }
    const [file, ...args] = deps.command!;
    let code: number;
    try {
      ({ code } = await runCommand(file!, args, { cwd: entry.checkout, env: deps.env, timeoutMs: deps.timeoutMs, signal: this.#abort.signal }));
    } catch (error) {
      code = -1;
      deps.log.warn({ url: entry.url, reason: error instanceof GitError ? error.message : String(error) }, 'the initial upload did not finish');
    }
    if (code !== 0) {
      await releaseUpload(deps.store, key, deps.serverId);
      deps.log.warn({ url: entry.url, exitCode: code }, 'the initial upload failed; its reservation is released for a later start');
      return 'failed';
    }
    const completedAt = this.now().toISOString();
    const index = await this.#recordCompletion(entry.url, completedAt);
    if (index === undefined) {
      deps.log.error({ url: entry.url }, 'the initial upload succeeded but its completion could not be recorded; the reservation is kept for reconciliation');
      return 'uncertain';
    }
    await releaseUpload(deps.store, key, deps.serverId);
    deps.log.info({ url: entry.url }, 'initial upload completed');
    // The tenant cluster is the authority; the parent's copy hears of it once, as a saved section does.
    deps.mirror?.({ cluster_id: deps.clusterId, url: entry.url, index, completedAt });
    return 'completed';
  }

  /**
   * Rereads the entry by URL (the list may have changed since startup) and marks it, guarded by its position;
   * answers that position, or undefined when nothing was marked.
   */
  async #recordCompletion(url: string, completedAt: string): Promise<number | undefined> {
    const { index } = await this.#entryIndex(url);
    if (index < 0) return undefined;
    const at = `repositories.${index}`;
    const { matchedCount } = await clusterRecords(this.deps.store).updateOne(
      { ...this.#clusterFilter(), [`${at}.url`]: url },
      { $set: { [`${at}.initialUpload.completed`]: true, [`${at}.initialUpload.completedAt`]: completedAt } },
    );
    return matchedCount === 1 ? index : undefined;
  }

  #clusterFilter() {
    return clusterOf(this.deps.clusterId, this.deps.organizationId);
  }

  /** Where the entry of `url` sits in the stored list now, and whether it is already marked completed. */
  async #entryIndex(url: string): Promise<{ index: number; completed: boolean }> {
    const cluster = await clusterRecords(this.deps.store).findOne(this.#clusterFilter());
    const list = Array.isArray(cluster?.repositories) ? (cluster.repositories as Array<{ url?: unknown; initialUpload?: { completed?: unknown } }>) : [];
    const index = list.findIndex((item) => item?.url === url);
    return { index, completed: index >= 0 && list[index]?.initialUpload?.completed === true };
  }

  private now(): Date {
    return this.deps.now?.() ?? new Date();
  }
}
