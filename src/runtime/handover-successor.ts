import { isIP } from 'node:net';
import type { ResolvedConfig } from '../config/schema.js';
import { HANDOVER_ENV, HandoverError, isPredecessorMessage, type PredecessorMessage, type Seed, type SocketRole } from './handover-messages.js';

/** The part of `process` the successor talks through (its IPC channel to the old primary). */
export interface PredecessorChannel {
  readonly connected: boolean;
  send?(message: unknown, handle?: undefined, options?: undefined, callback?: (error: Error | null) => void): boolean;
  on(event: 'message', listener: (message: unknown, handle?: unknown) => void): unknown;
  on(event: 'disconnect', listener: () => void): unknown;
  off(event: 'message', listener: (message: unknown, handle?: unknown) => void): unknown;
  disconnect?(): void;
  channel?: { unref(): void } | null;
}

export interface WorkerReadyEvents {
  on(event: 'worker:ready', listener: () => void): unknown;
  off(event: 'worker:ready', listener: () => void): unknown;
}

/** How long the successor waits for its predecessor's answer before giving up: the predecessor is stuck. */
const ANSWER_TIMEOUT_MS = 60_000;

/**
 * SPEC 1.10, the new primary's side of a hand-over. It says hello, takes the seed (the listening addresses,
 * storage, shed list) and the sockets, and when every worker is ready asks to take over; the old primary
 * answers `go` (the commit point) and is told once this primary accepts on every socket. A predecessor that
 * goes away before `go` ends the hand-over: this process leaves (it holds nothing the service manager knows).
 */
export class HandoverSuccessor {
  private readonly waiters = new Map<string, (message: PredecessorMessage, handle: unknown) => void>();
  private readonly handles = new Map<SocketRole, unknown>();
  private storageWriter: ((draft: unknown) => Promise<number | boolean>) | undefined;
  private committed = false;
  private left = false;

  private constructor(
    private readonly channel: PredecessorChannel,
    readonly predecessorPid: number,
    private readonly onLost: (reason: string) => void,
  ) {
    channel.on('message', (message, handle) => this.receive(message, handle));
    channel.on('disconnect', () => {
      if (!this.committed) this.onLost('the old primary closed the hand-over channel before it let this one take over');
    });
  }

  /**
   * In a primary started by a hand-over (its environment says so and it has an IPC channel): the hand-over,
   * joined with `hello`, once the seed arrived. The marker is removed from the environment first.
   */
  static async join(env: NodeJS.ProcessEnv, channel: PredecessorChannel, version: string, onLost: (reason: string) => void): Promise<HandoverSuccessor | undefined> {
    const marker = env[HANDOVER_ENV];
    if (marker === undefined) return undefined;
    delete env[HANDOVER_ENV];
    // Workers are forked with `process.env`: none of them, nor this primary's own successor, must see it.
    delete process.env[HANDOVER_ENV];
    if (!channel.send || !channel.connected) return undefined;
    const successor = new HandoverSuccessor(channel, Number(marker), onLost);
    const seed = successor.next('seed');
    successor.post({ fp: 'handover', type: 'hello', pid: process.pid, version });
    successor.seed = (await seed) as Seed;
    return successor;
  }

  seed!: Seed;

  /**
   * Why this primary's configuration cannot take the sockets the seed describes, if it cannot: a hand-over keeps
   * the listening addresses (a changed port or a new HTTPS port needs a restart). A configured port 0 takes any.
   */
  mismatch(expected: Partial<Record<SocketRole, { host: string; port: number }>>): string | undefined {
    for (const role of ['http', 'https', 'mesh'] as const) {
      const want = expected[role];
      const have = this.seed.listening[role];
      if (role !== 'mesh' && Boolean(want) !== Boolean(have)) {
        return want ? `${role} is configured here but the old primary has no ${role} socket (restart to add it)` : `the old primary serves ${role}, which this configuration turns off (restart to remove it)`;
      }
      if (!want || !have) continue;
      const samePort = want.port === 0 || want.port === have.port;
      const sameHost = !isIP(want.host) || want.host === have.host;
      if (!samePort || !sameHost) return `${role} is ${want.host}:${want.port} here but the old primary listens on ${have.host}:${have.port}: a hand-over keeps the listening addresses (restart to change them)`;
    }
    return undefined;
  }

  /**
   * Takes the hand-over: the seed checked against this primary's `expected` addresses (see `listeningAddresses`)
   * and applied (`apply`: the storage, the shed list), then the sockets it describes, by role. What fails here is
   * told to the old primary, which keeps serving, and thrown.
   */
  async adopt(expected: Partial<Record<SocketRole, { host: string; port: number }>>, apply: (seed: Seed) => Promise<void>): Promise<ReadonlyMap<SocketRole, unknown>> {
    try {
      const mismatch = this.mismatch(expected);
      if (mismatch) throw new Error(mismatch);
      await apply(this.seed);
      return await this.sockets();
    } catch (error) {
      await this.failed((error as Error).message);
      throw error;
    }
  }

  /** The seed fits this primary's configuration: the listening sockets, by role, once all arrived. */
  async sockets(): Promise<ReadonlyMap<SocketRole, unknown>> {
    const roles = Object.keys(this.seed.listening) as SocketRole[];
    const all = new Promise<void>((resolve, reject) => {
      const check = () => roles.every((role) => this.handles.has(role)) && resolve();
      this.onSocket = check;
      this.timeout(reject, 'the sockets');
      check();
    });
    this.post({ fp: 'handover', type: 'sockets' });
    await all;
    return this.handles;
  }

  private onSocket: () => void = () => {};

  /** How many workers are ready, for the old primary's report if they never all are. */
  private progress(ready: number, target: number): void {
    this.post({ fp: 'handover', type: 'progress', ready, target });
  }

  /**
   * Resolves at the commit point, once every worker is ready (reported to the old primary as they come) and
   * the old primary said go: the HTTP and HTTPS sockets to take from then on.
   */
  async whenWorkersReady(fleet: { readonly active: number; readonly target: number }, events: WorkerReadyEvents): Promise<Array<{ role: 'http' | 'https'; handle: unknown }>> {
    await new Promise<void>((resolve) => {
      const check = () => {
        this.progress(fleet.active, fleet.target);
        if (fleet.active < fleet.target) return;
        events.off('worker:ready', check);
        resolve();
      };
      events.on('worker:ready', check);
      check();
    });
    await this.mayTakeOver();
    return (['http', 'https'] as const).filter((role) => this.handles.has(role)).map((role) => ({ role, handle: this.handles.get(role) }));
  }

  /** Every worker is ready: resolves at the commit point (`go`). */
  private async mayTakeOver(): Promise<void> {
    const go = this.next('go');
    this.post({ fp: 'handover', type: 'ready' });
    await go;
    this.committed = true;
  }

  /** Accepting on every socket: the old primary stops accepting and drains. */
  taken(): void {
    this.post({ fp: 'handover', type: 'taken' });
  }

  /** Storage writes of the old primary's draining workers are made here. */
  acceptStorageWrites(writer: (draft: unknown) => Promise<number | boolean>): void {
    this.storageWriter = writer;
  }

  /** Tells the old primary why this one will not take over; resolves once the message is out. */
  failed(reason: string): Promise<void> {
    this.left = true;
    return postFailure(this.channel, reason);
  }

  private receive(message: unknown, handle: unknown): void {
    if (!isPredecessorMessage(message)) return;
    switch (message.type) {
      case 'socket':
        if (handle) this.handles.set(message.role, handle);
        this.onSocket();
        return;
      case 'store':
        void this.store(message.id, message.draft);
        return;
      case 'released':
        // Nothing more comes: the channel must not keep this process alive, nor its closing end it.
        this.channel.channel?.unref();
        return;
      default:
        this.waiters.get(message.type)?.(message, handle);
    }
  }

  private async store(id: number, draft: unknown): Promise<void> {
    try {
      if (!this.storageWriter) throw new Error('this primary does not take storage writes yet');
      this.post({ fp: 'handover', type: 'stored', id, ok: true, result: await this.storageWriter(draft) });
    } catch (error) {
      this.post({ fp: 'handover', type: 'stored', id, ok: false, message: (error as Error).message.slice(0, 4_000) });
    }
  }

  private next(type: PredecessorMessage['type']): Promise<PredecessorMessage> {
    return new Promise((resolve, reject) => {
      const cancel = this.timeout(reject, `"${type}"`);
      this.waiters.set(type, (message) => {
        cancel();
        this.waiters.delete(type);
        resolve(message);
      });
    });
  }

  private timeout(reject: (error: Error) => void, what: string): () => void {
    const timer = setTimeout(() => reject(new HandoverError('aborted', `the old primary (pid ${this.predecessorPid}) sent no ${what} within ${ANSWER_TIMEOUT_MS} ms`)), ANSWER_TIMEOUT_MS);
    timer.unref();
    return () => clearTimeout(timer);
  }

  private post(message: unknown): void {
    if (this.left || !this.channel.connected) return;
    this.channel.send?.(message, undefined, undefined, () => {});
  }
}

function postFailure(channel: PredecessorChannel, reason: string): Promise<void> {
  if (!channel.send || !channel.connected) return Promise.resolve();
  return new Promise((resolve) => {
    channel.send!({ fp: 'handover', type: 'failed', reason: reason.slice(0, 4_000) }, undefined, undefined, () => resolve());
  });
}

/**
 * A primary started by a hand-over that fails before it joined (an invalid configuration, a bad flag) tells
 * the old primary why before it exits, so the operator reads the reason where they asked for the upgrade.
 */
export function reportHandoverFailure(reason: string, env: NodeJS.ProcessEnv = process.env, channel: PredecessorChannel = process as unknown as PredecessorChannel): Promise<void> {
  if (env[HANDOVER_ENV] === undefined) return Promise.resolve();
  return postFailure(channel, reason);
}

/** The addresses a configuration listens on, by role (`mesh` when the mesh is active): what a hand-over keeps. */
export function listeningAddresses(config: Pick<ResolvedConfig, 'http' | 'https' | 'mesh'>, meshActive: boolean): Partial<Record<SocketRole, { host: string; port: number }>> {
  const tls = Boolean(config.https.key && config.https.cert);
  return {
    http: { host: config.http.host, port: config.http.port },
    ...(tls ? { https: { host: config.http.host, port: config.https.port } } : {}),
    ...(meshActive ? { mesh: { host: config.mesh.host, port: config.mesh.port } } : {}),
  };
}
