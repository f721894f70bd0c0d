import { systemClock, type Clock } from './clock.js';
import type { RpcCall, RpcReply } from './messages.js';
import { firstError, type MethodChecks, type MethodTypes, type PrimaryApi, type WorkerApi } from './protocol.js';

/**
 * Requests to the other side, typed by its methods (`PrimaryApi`, `WorkerApi` in `protocol.ts`); `notify` asks
 * without waiting (no reply is sent).
 */
export interface RpcCaller<Calls extends MethodTypes = MethodTypes> {
  call<M extends keyof Calls & string>(method: M, params?: Calls[M]['params'], timeoutMs?: number): Promise<Calls[M]['result']>;
  notify<M extends keyof Calls & string>(method: M, params?: Calls[M]['params']): void;
}

/** The other side answered with an error: its message, and the error code (and field) when it had one. */
export class RpcRemoteError extends Error {
  override readonly name = 'RpcRemoteError';
  constructor(
    message: string,
    readonly code?: string,
    readonly field?: string,
  ) {
    super(message);
  }
}

/**
 * A call that got no answer it can use: none came in time (`rpc_timeout`), the channel is closed or the other
 * side exited (`rpc_closed`), or the answer is not what its method declares (`rpc_malformed`). A gathering caller
 * counts the other side as missing.
 */
export class RpcUnanswered extends Error {
  override readonly name = 'RpcUnanswered';
  constructor(
    message: string,
    readonly code: 'rpc_timeout' | 'rpc_closed' | 'rpc_malformed',
    options?: ErrorOptions,
  ) {
    super(message, options);
  }
}

/** The code of a request refused before its handler ran: an undeclared method, or parameters its declaration refuses. */
export const RPC_REFUSED = 'rpc_refused';

/** The id of a notification: nobody waits for it, so it is never answered. */
const NOTIFICATION = 0;

export interface RpcChannelOptions {
  /** The methods this side declares (`src/runtime/protocol.ts`): only they are handled, their parameters checked. */
  methods?: MethodChecks;
  /** What the other side's methods answer: each answer is checked before its caller reads it. */
  results?: MethodChecks;
  /** Told of a notification refused that way, or of a malformed answer (no caller would hear of it otherwise). */
  refused?: (reason: string) => void;
  /** Times the calls' answers (a fake clock in unit tests). */
  clock?: Clock;
}

/**
 * The one request/reply mechanism between a primary and its workers, over one IPC channel (either direction).
 * Unknown methods and throwing handlers answer with an error (its `code` and `field` kept), so a caller never
 * hangs; a caller that gets no answer in time, or whose other side exits (`closeAll`), gets an error, which
 * a gathering caller counts as "missing". With the methods this side declares (`src/runtime/protocol.ts`), a
 * request's parameters are checked before its handler runs, and only declared methods can be handled; a
 * notification refused that way is told to `refused` (no caller would hear of it). With the other side's
 * declared answers (`results`), an answer is checked before its caller reads it.
 */
export class RpcChannel<Calls extends MethodTypes = MethodTypes, Handles extends MethodTypes = MethodTypes> implements RpcCaller<Calls> {
  private nextId = 1;
  private readonly pending = new Map<number, { method: string; resolve: (value: unknown) => void; reject: (error: Error) => void; cancel: () => void }>();
  private readonly handlers = new Map<string, (params: unknown) => unknown>();
  private readonly methods: MethodChecks | undefined;
  private readonly results: MethodChecks | undefined;
  private readonly refused: ((reason: string) => void) | undefined;
  private readonly clock: Clock;

  constructor(
    private readonly post: (message: RpcCall | RpcReply) => void,
    options: RpcChannelOptions = {},
  ) {
    this.methods = options.methods;
    this.results = options.results;
    this.refused = options.refused;
    this.clock = options.clock ?? systemClock;
  }

  /** Answers `method` (its parameters already checked against its declaration). */
  handle<M extends keyof Handles & string>(method: M, handler: (params: Handles[M]['params']) => unknown): void {
    if (this.methods && !this.methods.has(method)) throw new Error(`RPC method "${method}" is not declared in the protocol`);
    this.handlers.set(method, handler as (params: unknown) => unknown);
  }

  call<M extends keyof Calls & string>(method: M, params?: Calls[M]['params'], timeoutMs = 5_000): Promise<Calls[M]['result']> {
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      const cancel = this.clock.setTimeout(() => {
        this.pending.delete(id);
        reject(new RpcUnanswered(`${method}: no reply within ${timeoutMs} ms`, 'rpc_timeout'));
      }, timeoutMs);
      this.pending.set(id, { method, resolve: resolve as (value: unknown) => void, reject, cancel });
      try {
        this.post({ fp: 'rpc', id, method, params });
      } catch (error) {
        cancel();
        this.pending.delete(id);
        reject(new RpcUnanswered(`${method}: channel closed`, 'rpc_closed', { cause: error }));
      }
    });
  }

  notify<M extends keyof Calls & string>(method: M, params?: Calls[M]['params']): void {
    try {
      this.post({ fp: 'rpc', id: NOTIFICATION, method, params });
    } catch {
      // the other side is gone: a notification has nobody to tell
    }
  }

  /** Feed every `rpc` / `reply` message of the channel here. */
  async receive(message: RpcCall | RpcReply): Promise<void> {
    if (message.fp === 'reply') {
      const waiting = this.pending.get(message.id);
      if (!waiting) return;
      this.pending.delete(message.id);
      waiting.cancel();
      if (!message.ok) return waiting.reject(new RpcRemoteError(message.error ?? 'remote error', message.code, message.field));
      const check = this.results?.get(waiting.method);
      if (!check || check.Check(message.result)) return waiting.resolve(message.result);
      const reason = `${waiting.method}: malformed answer: ${firstError(check, message.result)}`;
      this.refused?.(reason);
      waiting.reject(new RpcUnanswered(reason, 'rpc_malformed'));
      return;
    }
    const notification = message.id === NOTIFICATION;
    const refusal = this.refusal(message);
    if (notification) {
      if (refusal) this.refused?.(refusal);
      // Its handler's failure has no caller to go to; the handler logs what matters to it.
      else await Promise.resolve().then(() => this.handlers.get(message.method)!(message.params)).catch(() => {});
      return;
    }
    let reply: RpcReply;
    try {
      if (refusal) throw Object.assign(new Error(refusal), { code: RPC_REFUSED });
      reply = { fp: 'reply', id: message.id, ok: true, result: await this.handlers.get(message.method)!(message.params) };
    } catch (error) {
      reply = failure(message.id, error);
    }
    try {
      this.post(reply);
    } catch {
      // the other side is gone; nobody is waiting for this reply any more
    }
  }

  /** Why a request is not handled here: an unknown method, or parameters its declaration refuses. */
  private refusal(message: RpcCall): string | undefined {
    if (!this.handlers.has(message.method)) return `unknown method "${String(message.method).slice(0, 128)}"`;
    const check = this.methods?.get(message.method);
    // No parameters (absent, or null) are checked as an empty object; the handler gets what was sent.
    const params = message.params ?? {};
    if (check && !check.Check(params)) return `${message.method}: parameters refused: ${firstError(check, params)}`;
    return undefined;
  }

  /** Fail every call still waiting, e.g. when the other process exited. */
  closeAll(reason: string): void {
    for (const [id, waiting] of this.pending) {
      waiting.cancel();
      waiting.reject(new RpcUnanswered(reason, 'rpc_closed'));
      this.pending.delete(id);
    }
  }
}

/** A handler may throw anything (`Promise.reject()` included); reading `.message` off it must not fail. */
function failure(id: number, error: unknown): RpcReply {
  if (!(error instanceof Error)) return { fp: 'reply', id, ok: false, error: String(error) };
  const { code, field } = error as { code?: unknown; field?: unknown };
  return {
    fp: 'reply',
    id,
    ok: false,
    error: error.message,
    ...(typeof code === 'string' ? { code } : {}),
    ...(typeof field === 'string' ? { field } : {}),
  };
}

/** The primary's end of a worker's channel: it calls the worker's methods and answers its own. */
export type PrimaryEnd = RpcChannel<WorkerApi, PrimaryApi>;
/** A worker's end of its channel: it calls the primary's methods and answers its own. */
export type WorkerEnd = RpcChannel<PrimaryApi, WorkerApi>;
