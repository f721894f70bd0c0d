import type { Logger } from '../logging/logger.js';
import type { ResolvedConfig } from '../config/schema.js';
import type { PrimaryRuntime } from '../runtime/primary.js';
import type { WorkerRuntime } from '../runtime/worker.js';
import type { PrimaryChannels } from '../runtime/channels.js';
import type { ServerStatus, WorkerStatus } from '../runtime/status.js';
import type { ServerEmitter } from '../runtime/events.js';
import { isAcceptedAfterGrace, type AcceptedAfterGrace } from '../runtime/readiness-grace.js';
import { IpcError } from '../ipc/envelope.js';
import type { Store } from '../db/types.js';
import { saveInventorySection, type InventorySaveResult } from '../inventory/servers.js';
import { assertHostControlAllowed, runHostCommand } from './host-control.js';

/** How long a shed change waits for the workers to confirm it; a worker that does not is left behind. */
const SHED_ACK_TIMEOUT_MS = 2_000;
/** The primary's shed list, pushed to a worker (declared in `src/runtime/protocol.ts`). */
const SHED_METHOD = 'worker.shed';

export interface WorkerStateTarget {
  /** In the primary: the worker number to act on (default: every worker). */
  worker?: number;
}

/** What the state controls act through: this process's identity, runtime, store and the services they tell. */
interface ServerStateDeps {
  readonly id: string;
  readonly config: ResolvedConfig;
  readonly log: Logger;
  readonly status: ServerStatus | WorkerStatus;
  readonly primaryRuntime?: PrimaryRuntime;
  readonly workerRuntime?: WorkerRuntime;
  readonly db?: Store;
  /** Knows the platform organization, recorded in the inventory as the server's owner (SPEC 8.4). */
  readonly authorize?: { directory: { platformOrganization(): Promise<string | null> } };
  /** Where `shed` is announced (SPEC 3.4): in the primary once applied, in a forked worker once received. */
  readonly events?: Pick<ServerEmitter, 'emitSafe'>;
  /** SPEC 13.2: told of each section this process saved, to mirror it to the parent (never waited for). */
  readonly manager?: { mirrorSave(serverId: string, clusterId: string, section: string, fields: Record<string, unknown>): void };
}

/**
 * SPEC 3: ingress controls and lifecycle of this server. In the primary every call acts on the whole server
 * (or one worker); in a worker `cordon` / `drain` / `restart` act on that worker and server-wide settings
 * (`shed`) are asked of the primary.
 */
export class ServerState {
  private shedOrganizations = new Set<string>();
  private readonly shedListeners: Array<(organizations: ReadonlySet<string>) => void> = [];
  private masterSection: (() => Record<string, unknown>) | undefined;

  constructor(
    private readonly deps: ServerStateDeps,
    private readonly channels?: PrimaryChannels,
  ) {
    // A worker is told the current list as soon as it listens; every change after that is confirmed by each
    // worker (see `pushShed`).
    channels?.onConnect((endpoint) => endpoint.rpc.notify(SHED_METHOD, { organizations: [...this.shedOrganizations], initial: true }));
    const worker = deps.workerRuntime;
    if (worker) {
      let synced!: () => void;
      const firstList = new Promise<void>((resolve) => (synced = resolve));
      worker.rpc.handle(SHED_METHOD, (params) => {
        const { organizations, initial } = params as { organizations: string[]; initial?: boolean };
        this.replaceShed(organizations);
        synced();
        // A change (the first list is none): a forked worker tells its own listeners. In single-process mode
        // the primary, the same process, announced it.
        if (!initial && !channels) this.announceShed();
        return true;
      });
      // Not ready (no connections) before it knows which organizations are shed.
      worker.beforeReady(() => firstList);
    }
  }

  get status(): ServerStatus | WorkerStatus {
    return this.deps.status;
  }

  /** Organizations whose traffic this server turns away with the fallback (SPEC 3.4). */
  get shedding(): ReadonlySet<string> {
    return this.shedOrganizations;
  }

  /** Called with the new set whenever shedding changes in this process (e.g. to close shed WebSockets). */
  onShedChange(listener: (organizations: ReadonlySet<string>) => void): void {
    this.shedListeners.push(listener);
  }

  private replaceShed(organizations: string[]): void {
    this.shedOrganizations = new Set(organizations);
    for (const listener of this.shedListeners) listener(this.shedOrganizations);
  }

  isShed(organizationId: string | undefined): boolean {
    return organizationId !== undefined && this.shedOrganizations.has(organizationId);
  }

  async cordon(value: boolean, target?: WorkerStateTarget): Promise<unknown> {
    const { primaryRuntime, workerRuntime } = this.deps;
    if (primaryRuntime) return primaryRuntime.setWorkerState('cordon', value, target?.worker);
    const [status] = await this.throughPrimary('cordon', value);
    return { worker: workerRuntime!.workerId, status };
  }

  async drain(value: boolean, target?: WorkerStateTarget): Promise<unknown> {
    const { primaryRuntime, workerRuntime } = this.deps;
    if (primaryRuntime) return primaryRuntime.setWorkerState('drain', value, target?.worker);
    const [result] = await this.throughPrimary('drain', value);
    return { worker: workerRuntime!.workerId, ...(typeof result === 'object' && result !== null ? result : { status: result }) };
  }

  /**
   * A control envelope's `cordon` or `drain` (SPEC 5.4): the same change, answered once accepted. One that
   * waits for the readiness grace (it takes out the last serving workers) answers `{ accepted: true,
   * effectiveInMs }` as the grace begins, and is applied when the grace ends: the envelope's caller waits
   * no longer than its timeout, which is no longer than the grace by default.
   */
  async accept(action: 'cordon' | 'drain', value: boolean): Promise<unknown> {
    const { primaryRuntime, workerRuntime } = this.deps;
    if (primaryRuntime) return primaryRuntime.acceptWorkerState(action, value);
    const result = await this.throughPrimary(action, value, true);
    const worker = workerRuntime!.workerId;
    if (isAcceptedAfterGrace(result)) return { worker, status: workerRuntime!.status, ...result };
    const [applied] = result;
    return { worker, ...(typeof applied === 'object' && applied !== null ? applied : { status: applied }) };
  }

  /**
   * A worker's own cordon or drain (an envelope sent to workers, `broadcast` or `worker: n`) is applied by the
   * primary, as one from the primary is: it sees every worker, so taking out the last serving ones waits the
   * readiness grace whichever way it was asked for, and concurrent requests are checked one after the other.
   * `whenAccepted`: answered as the grace begins rather than after it (`accept`).
   */
  private throughPrimary(action: 'cordon' | 'drain', value: boolean, whenAccepted: true): Promise<unknown[] | AcceptedAfterGrace>;
  private throughPrimary(action: 'cordon' | 'drain', value: boolean): Promise<unknown[]>;
  private throughPrimary(action: 'cordon' | 'drain', value: boolean, whenAccepted = false): Promise<unknown[] | AcceptedAfterGrace> {
    const { config, workerRuntime } = this.deps;
    const timeoutMs = config.lifecycle.readinessGraceMs + config.shutdown.drainTimeoutMs + 10_000;
    return workerRuntime!.rpc.call('primary.workerState', { action, value, ...(whenAccepted ? { whenAccepted } : {}) }, timeoutMs);
  }

  /** SPEC 3.4: stop serving these organizations (their requests get the fallback), or `false` to serve everyone. */
  async shed(organizations: string[] | false): Promise<string[]> {
    const list = organizations === false ? [] : organizations;
    if (!Array.isArray(list) || list.some((id) => typeof id !== 'string' || id.length === 0 || id.length > 128)) {
      throw new IpcError('bad_request', 'shed takes a list of organization ids or false', 'data');
    }
    const { workerRuntime } = this.deps;
    if (!this.channels && workerRuntime) {
      await workerRuntime.rpc.call('primary.shed', { organizations: list });
      return list;
    }
    return this.applyShed(list);
  }

  /** The same as `shed`. */
  setShed(organizations: string[] | false): Promise<string[]> {
    return this.shed(organizations);
  }

  /**
   * @internal the primary's own application of a shed list, pushed to every worker. Resolves once each worker
   * has applied it (or left, or `SHED_ACK_TIMEOUT_MS` passed), so a caller that gets the answer knows no
   * worker serves a shed organization any more.
   */
  async applyShed(organizations: string[]): Promise<string[]> {
    this.replaceShed(organizations);
    this.deps.log.info({ organizations }, organizations.length ? 'shedding organizations' : 'shedding ended');
    await this.pushShed(organizations);
    this.announceShed();
    return organizations;
  }

  private announceShed(): void {
    const organizations = [...this.shedOrganizations];
    this.deps.events?.emitSafe('shed', { organizations: organizations.length > 0 ? organizations : false });
  }

  private async pushShed(organizations: string[]): Promise<void> {
    const endpoints = this.channels?.endpoints() ?? [];
    if (endpoints.length === 0) return;
    const confirmed = await Promise.allSettled(endpoints.map((endpoint) => endpoint.rpc.call(SHED_METHOD, { organizations }, SHED_ACK_TIMEOUT_MS)));
    // A worker that exited meanwhile serves nobody; one still there that did not confirm is told of.
    const late = endpoints.filter((endpoint, index) => confirmed[index].status === 'rejected' && endpoint.connected);
    if (late.length > 0) this.deps.log.warn({ workers: late.map((endpoint) => endpoint.workerId) }, 'workers did not confirm the shed list in time');
  }

  /**
   * In a worker: replace this worker (replacement first, then drain). In the primary: a rolling restart of
   * every worker, or with `isPrimary` a graceful stop of the whole server with the configured exit code so
   * the service manager starts it again; with `handover` a hand-over to a new primary (SPEC 1.10).
   */
  async restart(options: { isPrimary?: boolean; handover?: boolean } = {}): Promise<unknown> {
    const { primaryRuntime, workerRuntime, config } = this.deps;
    if (options.handover) {
      // SPEC 1.10: answered once the new primary serves, or with the reason this one keeps serving.
      if (!primaryRuntime) throw new IpcError('bad_request', 'a hand-over is the primary\'s: address it with master: true');
      return primaryRuntime.handover.start('restart envelope').catch((error: Error) => {
        throw new IpcError('unavailable', error.message);
      });
    }
    if (workerRuntime && !primaryRuntime) return workerRuntime.rpc.call('primary.recycleWorker', { pid: process.pid });
    if (options.isPrimary) {
      this.deps.log.warn('primary restart requested: stopping gracefully');
      setImmediate(() => void primaryRuntime!.shutdown('restart').then(() => process.exit(config.lifecycle.restartExitCode)));
      return { restarting: true, exitCode: config.lifecycle.restartExitCode };
    }
    void primaryRuntime!.restartWorkers({ reason: 'restart requested' }).catch((error) => this.deps.log.error({ err: error }, 'rolling restart failed'));
    return { restarting: 'workers' };
  }

  /**
   * `restart` addressed to the primary (SPEC 3.5, 1.10): the server application restarts with no downtime — a
   * new primary started from the code on disk takes the listening sockets, forks its workers, and once they
   * are ready this one drains its own and exits 0. Answered as soon as the new primary is started, with its
   * pid: it serves only after its workers are ready, longer than an envelope's caller waits, and this primary
   * answers nothing after it left. A failure before then leaves this primary serving and is logged; a hand-over
   * this primary cannot make (single-process mode, PID 1 of a container, another one running) is refused at once.
   */
  restartPrimary(): unknown {
    const { primaryRuntime } = this.deps;
    if (!primaryRuntime) throw new IpcError('bad_request', 'the primary restarts itself: address it with master: true');
    let launched: { successor: number; done: Promise<unknown> };
    try {
      launched = primaryRuntime.handover.launch('restart envelope');
    } catch (error) {
      throw new IpcError('unavailable', `${(error as Error).message} (data: { "isPrimary": true } stops this primary instead, with exit code ${this.deps.config.lifecycle.restartExitCode} for its service manager to start it again)`);
    }
    // Its outcome is logged by the hand-over itself (committed, or aborted with the reason).
    launched.done.catch(() => {});
    return { accepted: true, restarting: 'primary', handover: { from: { pid: process.pid }, to: { pid: launched.successor } } };
  }

  /** SPEC 1.6: the rolling restart of this server's workers, one at a time, asked of the primary from any process. */
  async restartWorkers(reason: string): Promise<unknown> {
    const { primaryRuntime, workerRuntime } = this.deps;
    // Answered at once: the caller may be one of the workers it replaces.
    if (primaryRuntime) void primaryRuntime.restartWorkers({ reason }).catch((error) => this.deps.log.error({ err: error }, 'rolling restart failed'));
    else await workerRuntime!.rpc.call('primary.restartWorkers', { reason });
    return { restarting: 'workers' };
  }

  /** @internal the primary's `master` section: the mesh knows its public and mesh URLs. */
  describeInventory(section: () => Record<string, unknown>): void {
    this.masterSection = section;
  }

  /** SPEC 7.4: writes this process's section of its `servers` document (primary: `master`; worker: `workers.<id>`). */
  async save(): Promise<InventorySaveResult> {
    const { db, id, config, primaryRuntime, workerRuntime } = this.deps;
    if (!db) throw new IpcError('unavailable', 'this process has no store');
    if (primaryRuntime) {
      const section = this.masterSection?.() ?? { status: primaryRuntime.status === 'stopping' ? 'stopped' : 'running', pid: process.pid };
      const owner = (await this.deps.authorize?.directory.platformOrganization()) ?? undefined;
      return this.mirrored('master', section, await saveInventorySection(db, id, config.server.cluster, 'master', section, owner));
    }
    const section = `workers.${workerRuntime!.workerId}`;
    const fields = { pid: process.pid, status: workerRuntime!.status, updatedAt: new Date().toISOString() };
    return this.mirrored(section, fields, await saveInventorySection(db, id, config.server.cluster, section, fields));
  }

  /** A save that was written goes to the manager once; a skipped one (terminating, failed) does not. */
  private mirrored(section: string, fields: Record<string, unknown>, result: InventorySaveResult): InventorySaveResult {
    if (result.saved) this.deps.manager?.mirrorSave(this.deps.id, this.deps.config.server.cluster, section, fields);
    return result;
  }

  reboot(confirm: unknown): Promise<unknown> {
    return this.hostCommand('reboot', confirm);
  }

  shutdown(confirm: unknown): Promise<unknown> {
    return this.hostCommand('shutdown', confirm);
  }

  /**
   * SPEC 3.5: once confirmed, the node stops as a graceful stop does (connections drained, workers gone, links
   * closed: 1012 for a reboot, 1000 for a shutdown) and only then runs the host command. The caller is answered
   * first: no reply could come back after it.
   */
  private async hostCommand(kind: 'reboot' | 'shutdown', confirm: unknown): Promise<unknown> {
    const { config, id, primaryRuntime } = this.deps;
    if (!primaryRuntime) throw new IpcError('bad_request', `${kind} is handled by the primary: address it with master: true`);
    assertHostControlAllowed(config.lifecycle, id, confirm);
    const argv = kind === 'reboot' ? config.lifecycle.rebootCommand : config.lifecycle.shutdownCommand;
    this.deps.log.warn({ command: argv[0] }, `host ${kind} confirmed: stopping gracefully, then running the configured command`);
    setImmediate(() => {
      void primaryRuntime.shutdown(kind).then(async () => {
        const outcome = await runHostCommand(argv);
        if (outcome.code !== 0) this.deps.log.error({ code: outcome.code, stderr: outcome.stderr }, `host ${kind} command failed`);
        else this.deps.log.warn(`host ${kind} command ran`);
        process.exit(outcome.code === 0 ? 0 : 1);
      });
    });
    return { command: kind, accepted: true };
  }
}
