import { systemClock, type Clock } from './clock.js';
import type { RpcCall, RpcReply } from './messages.js';
import { firstError, type MethodChecks } from './protocol.js';

export type RpcHandler = (params: unknown) => unknown | Promise<unknown>;

/** A request this side asks for; `notify` asks without waiting (no reply is sent). */
export interface RpcCaller {
  call<T = unknown>(method: string, params?: unknown, timeoutMs?: number): Promise<T>;
  notify(method: string, params?: unknown): void;
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
 * A call that got no answer: none came in time (`rpc_timeout`), or the channel is closed or the other side
 * exited (`rpc_closed`). A gathering caller counts the other side as missing.
 */
export class RpcUnanswered extends Error {
  override readonly name = 'RpcUnanswered';
  constructor(
    message: string,
    readonly code: 'rpc_timeout' | 'rpc_closed',
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
  /** Told of a notification refused that way (no caller would hear of it). */
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
 * notification refused that way is told to `refused` (no caller would hear of it).
 */
export class RpcChannel implements RpcCaller {
  private nextId = 1;
  private readonly pending = new Map<number, { resolve: (value: unknown) => void; reject: (error: Error) => void; cancel: () => void }>();
  private readonly handlers = new Map<string, RpcHandler>();

  private readonly methods: MethodChecks | undefined;
  private readonly refused: ((reason: string) => void) | undefined;
  private readonly clock: Clock;

  constructor(
    private readonly post: (message: RpcCall | RpcReply) => void,
    options: RpcChannelOptions = {},
  ) {
    this.methods = options.methods;
    this.refused = options.refused;
    this.clock = options.clock ?? systemClock;
  }

  handle(method: string, handler: RpcHandler): void {
    if (this.methods && !this.methods.has(method)) throw new Error(`RPC method "${method}" is not declared in the protocol`);
    this.handlers.set(method, handler);
  }

  call<T = unknown>(method: string, params?: unknown, timeoutMs = 5_000): Promise<T> {
    const id = this.nextId++;
    return new Promise<T>((resolve, reject) => {
      const cancel = this.clock.setTimeout(() => {
        this.pending.delete(id);
        reject(new RpcUnanswered(`${method}: no reply within ${timeoutMs} ms`, 'rpc_timeout'));
      }, timeoutMs);
      this.pending.set(id, { resolve: resolve as (value: unknown) => void, reject, cancel });
      try {
        this.post({ fp: 'rpc', id, method, params });
      } catch (error) {
        cancel();
        this.pending.delete(id);
        reject(new RpcUnanswered(`${method}: channel closed`, 'rpc_closed', { cause: error }));
      }
    });
  }

  notify(method: string, params?: unknown): void {
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
      if (message.ok) waiting.resolve(message.result);
      else waiting.reject(new RpcRemoteError(message.error ?? 'remote error', message.code, message.field));
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
