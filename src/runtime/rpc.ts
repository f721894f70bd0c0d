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

/** The id of a notification: nobody waits for it, so it is never answered. */
const NOTIFICATION = 0;

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
  private readonly pending = new Map<number, { resolve: (value: unknown) => void; reject: (error: Error) => void; timer: NodeJS.Timeout }>();
  private readonly handlers = new Map<string, RpcHandler>();

  constructor(
    private readonly post: (message: RpcCall | RpcReply) => void,
    private readonly methods?: MethodChecks,
    private readonly refused?: (reason: string) => void,
  ) {}

  handle(method: string, handler: RpcHandler): void {
    if (this.methods && !this.methods.has(method)) throw new Error(`RPC method "${method}" is not declared in the protocol`);
    this.handlers.set(method, handler);
  }

  call<T = unknown>(method: string, params?: unknown, timeoutMs = 5_000): Promise<T> {
    const id = this.nextId++;
    return new Promise<T>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        reject(new Error(`${method}: no reply within ${timeoutMs} ms`));
      }, timeoutMs);
      timer.unref();
      this.pending.set(id, { resolve: resolve as (value: unknown) => void, reject, timer });
      try {
        this.post({ fp: 'rpc', id, method, params });
      } catch (error) {
        clearTimeout(timer);
        this.pending.delete(id);
        reject(new Error(`${method}: channel closed`, { cause: error }));
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
      clearTimeout(waiting.timer);
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
      if (refusal) throw new Error(refusal);
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
      clearTimeout(waiting.timer);
      waiting.reject(new Error(reason));
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
