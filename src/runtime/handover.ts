import type { Logger } from '../logging/logger.js';
import type { Clock } from './clock.js';
import { HandoverError, isSuccessorMessage, type PredecessorMessage, type Seed, type SocketRole, type SuccessorMessage } from './handover-messages.js';

/** The new primary as the old one sees it: a child process with an IPC channel, in its own process group. */
export interface SuccessorProcess {
  readonly pid: number;
  send(message: PredecessorMessage, handle?: unknown): void;
  onMessage(listener: (message: unknown) => void): void;
  /** The process exited, could not start, or closed its channel (before the commit point, as good as gone). */
  onGone(listener: (how: string) => void): void;
  /** Kills it and every process it forked (its process group). */
  kill(): void;
  /** Closes the channel: the new primary no longer depends on this process in any way. */
  release(): void;
}

export interface ListeningSocket {
  role: SocketRole;
  host: string;
  port: number;
  /** The listening handle, as Node passes it between processes. */
  handle: unknown;
}

/** The reactive storage's part: the new primary becomes the authority at the commit point. */
export interface StorageHandover {
  /** The entries as of now; every write from here on waits. */
  freeze(): Seed['storage'];
  /** Aborted: the waiting writes apply here, in order. */
  thaw(): void;
  /** Committed: the waiting writes and every later one are made on the new primary through `write`. */
  forwardTo(write: (draft: unknown) => Promise<number | boolean>): void;
}

/** What the composition root contributes: the subsystems built over the runtime. */
export interface HandoverParts {
  storage: StorageHandover;
  /** Organizations shed now (SPEC 3.4): the new primary keeps shedding them. */
  shed(): string[];
  /** Sockets of other subsystems (the mesh listener). */
  sockets(): ListeningSocket[];
  /** Committed: stop what must not run in two primaries, close the mesh links (1012, peers redial the new one). */
  committed(): void;
  /** Once this primary's workers are gone: release what it still holds (plugins, the store), writing nothing. */
  release(): Promise<void>;
}

export interface HandoverDeps {
  clock: Clock;
  log: Logger;
  version: string;
  /** `workers.readyTimeoutMs`: the longest the new primary may take to say hello, and then to have every worker ready. */
  readyTimeoutMs: number;
  /** Starts the new primary from the code on disk. */
  spawn(): SuccessorProcess;
  /** The runtime's own listening sockets (HTTP, HTTPS). */
  sockets(): ListeningSocket[];
  /** Why a hand-over cannot start now, if it cannot. */
  refusal(): string | undefined;
  /** Committed: stop accepting and drain the workers; resolves once they are gone. */
  retire(): Promise<void>;
  /** Everything is released: leave (exit 0, or stay as a stand-in where leaving would end the container). */
  exit(): void;
}

export interface HandoverResult {
  from: { pid: number; version: string };
  to: { pid: number; version: string };
  trigger: string;
  durationMs: number;
}

/** Why a primary in this state cannot hand over now, if it cannot. */
export function handoverRefusal(state: { fleet: boolean; started: boolean; stopping: boolean; rolling: boolean }, pid = process.pid): string | undefined {
  if (!state.fleet) return 'single-process mode (workers: 0) serves in the primary itself and cannot hand over: restart it instead';
  if (state.stopping) return 'this primary is shutting down';
  if (!state.started) return 'this primary is still starting';
  if (state.rolling) return 'a rolling restart is running: upgrade once it completed';
  if (pid === 1) return 'this primary is PID 1 of its container: its exit would end the container; run it under an init, e.g. docker run --init (docs/upgrading.md)';
  return undefined;
}

/** After `go`, taking over is a few local calls: a successor silent this long is stuck. */
const TAKE_OVER_TIMEOUT_MS = 10_000;

/**
 * SPEC 1.10, the old primary's side of a hand-over. It starts the new primary, sends it this server's state and
 * then its listening sockets, waits until every one of its workers is ready and only then lets it take over
 * (`go`). Until it has (`taken`), this primary has closed nothing: any failure — the new code not booting, a
 * configuration it refuses, workers not ready within `workers.readyTimeoutMs`, the process exiting — kills the
 * new primary's process group and leaves this one serving, with the reason for the caller. One at a time.
 */
export class Handover {
  private parts: HandoverParts | undefined;
  private running: { trigger: string; pid?: number } | undefined;
  private handedTo: number | undefined;

  constructor(private readonly deps: HandoverDeps) {}

  /** Wired once by the composition root, before the ports are bound. */
  register(parts: HandoverParts): void {
    if (this.parts) throw new Error('hand-over parts are registered once');
    this.parts = parts;
  }

  get inProgress(): boolean {
    return this.running !== undefined;
  }

  /** Resolves once the new primary serves; rejects with why this one keeps serving. */
  async start(trigger: string): Promise<HandoverResult> {
    return this.launch(trigger).done;
  }

  /**
   * The same hand-over, told as soon as the new primary is started: its pid, and `done`, which settles as
   * `start` does (whoever launches it handles `done`). A refusal is thrown at once.
   */
  launch(trigger: string): { successor: number; done: Promise<HandoverResult> } {
    if (this.handedTo !== undefined) throw new HandoverError('refused', `this primary already handed over to pid ${this.handedTo}`);
    if (this.running) throw new HandoverError('refused', `a hand-over is already running (asked by ${this.running.trigger}${this.running.pid ? `, to pid ${this.running.pid}` : ''})`);
    const refusal = this.deps.refusal() ?? (this.parts ? undefined : 'this primary cannot hand over: it was built without the hand-over parts');
    if (refusal) throw new HandoverError('refused', refusal);
    const running: { trigger: string; pid?: number } = { trigger };
    this.running = running;
    let attempt: Promise<HandoverResult>;
    try {
      attempt = this.attempt(trigger, this.parts!);
    } catch (error) {
      this.running = undefined;
      throw error;
    }
    const done = attempt.finally(() => {
      this.running = undefined;
    });
    return { successor: running.pid!, done };
  }

  private attempt(trigger: string, parts: HandoverParts): Promise<HandoverResult> {
    const { clock, log, readyTimeoutMs } = this.deps;
    const started = clock.now();
    const sockets = [...this.deps.sockets(), ...parts.sockets()];
    const child = this.deps.spawn();
    log.warn({ trigger, successor: child.pid }, 'hand-over: starting a new primary from the code on disk');
    this.running!.pid = child.pid;
    return new Promise<HandoverResult>((resolve, reject) => {
      let phase: 'boot' | 'seeded' | 'workers' | 'go' | 'done' = 'boot';
      let frozen = false;
      let progress: { ready: number; target: number } | undefined;
      let version = 'unknown';
      let cancelTimer = () => {};
      const deadline = (ms: number, reason: () => string) => {
        cancelTimer();
        cancelTimer = clock.setTimeout(() => abort(reason()), ms);
      };
      const abort = (reason: string) => {
        if (phase === 'done') return;
        phase = 'done';
        cancelTimer();
        child.kill();
        if (frozen) parts.storage.thaw();
        log.error({ successor: child.pid, reason }, 'hand-over aborted: this primary keeps serving');
        reject(new HandoverError('aborted', `hand-over aborted, this primary (pid ${process.pid}) keeps serving: ${reason}`));
      };
      const writes = new StorageForwarder(child);
      const commit = () => {
        phase = 'done';
        cancelTimer();
        this.handedTo = child.pid;
        parts.storage.forwardTo((draft) => writes.write(draft));
        parts.committed();
        const result = { from: { pid: process.pid, version: this.deps.version }, to: { pid: child.pid, version }, trigger, durationMs: clock.now() - started };
        log.warn(result, 'hand-over committed: the new primary serves; draining this one');
        resolve(result);
        void this.leave(child, parts);
      };

      deadline(readyTimeoutMs, () => `the new primary (pid ${child.pid}) did not start within workers.readyTimeoutMs (${readyTimeoutMs} ms)`);
      child.onGone((how) => {
        writes.gone();
        abort(`the new primary (pid ${child.pid}) ${how} before it took over (its output is in this server's log)`);
      });
      child.onMessage((raw) => {
        if (!isSuccessorMessage(raw) || phase === 'done') {
          if (isSuccessorMessage(raw) && raw.type === 'stored') writes.settle(raw);
          return;
        }
        const message: SuccessorMessage = raw;
        switch (message.type) {
          case 'hello': {
            if (phase !== 'boot') return;
            version = message.version;
            log.info({ successor: child.pid, version }, 'hand-over: the new primary booted; sending it the state, then the sockets');
            const storage = parts.storage.freeze();
            frozen = true;
            const listening = Object.fromEntries(sockets.map((socket) => [socket.role, { host: socket.host, port: socket.port }]));
            child.send({ fp: 'handover', type: 'seed', pid: process.pid, version: this.deps.version, listening, storage, shed: parts.shed() });
            phase = 'seeded';
            return;
          }
          case 'sockets':
            if (phase !== 'seeded') return;
            for (const socket of sockets) child.send({ fp: 'handover', type: 'socket', role: socket.role }, socket.handle);
            phase = 'workers';
            deadline(readyTimeoutMs, () => {
              const ready = progress ? `${progress.ready} of ${progress.target} ready` : 'none forked yet';
              return `the new primary's workers were not all ready within workers.readyTimeoutMs (${readyTimeoutMs} ms): ${ready}`;
            });
            return;
          case 'progress':
            progress = { ready: message.ready, target: message.target };
            return;
          case 'ready': {
            if (phase !== 'workers') return;
            // A shutdown or a rolling restart may have begun while the new primary booted.
            const late = this.deps.refusal();
            if (late) return abort(late);
            phase = 'go';
            child.send({ fp: 'handover', type: 'go' });
            deadline(TAKE_OVER_TIMEOUT_MS, () => `the new primary did not take over within ${TAKE_OVER_TIMEOUT_MS} ms of being told to`);
            return;
          }
          case 'taken':
            if (phase === 'go') commit();
            return;
          case 'failed':
            abort(`the new primary (pid ${child.pid}) failed: ${message.reason}`);
            return;
          case 'stored':
            writes.settle(message);
            return;
        }
      });
    });
  }

  /** After the commit point: drain, release, tell the new primary, leave. */
  private async leave(child: SuccessorProcess, parts: HandoverParts): Promise<void> {
    const { log } = this.deps;
    try {
      await this.deps.retire();
      await parts.release();
    } catch (error) {
      log.error({ err: error }, 'hand-over: draining this primary failed');
    }
    child.send({ fp: 'handover', type: 'released' });
    child.release();
    log.warn({ successor: child.pid }, 'hand-over complete: exiting');
    this.deps.exit();
  }
}

/** Storage writes of the draining workers, made on the new primary's authority over the hand-over channel. */
class StorageForwarder {
  private readonly pending = new Map<number, { resolve: (result: number | boolean) => void; reject: (error: Error) => void }>();
  private nextId = 1;
  private closed = false;

  constructor(private readonly child: SuccessorProcess) {}

  write(draft: unknown): Promise<number | boolean> {
    if (this.closed) return Promise.reject(new Error('the new primary is gone: the write was not made'));
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      this.child.send({ fp: 'handover', type: 'store', id, draft });
    });
  }

  settle(message: Extract<SuccessorMessage, { type: 'stored' }>): void {
    const waiter = this.pending.get(message.id);
    if (!waiter) return;
    this.pending.delete(message.id);
    if (message.ok) waiter.resolve(message.result);
    else waiter.reject(new Error(message.message));
  }

  gone(): void {
    this.closed = true;
    for (const waiter of this.pending.values()) waiter.reject(new Error('the new primary is gone: the write was not made'));
    this.pending.clear();
  }
}
