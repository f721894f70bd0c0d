import type { RpcCall, RpcReply } from './messages.js';
import { firstError, type MethodChecks } from './protocol.js';

export type RpcHandler = (params: unknown) => unknown | Promise<unknown>;

/**
 * Request/reply over one IPC channel (either direction). Unknown methods and throwing handlers answer with
 * an error, so a caller never hangs; a caller that gets no answer in time gets a timeout error. With the
 * methods this side declares (`src/runtime/protocol.ts`), a request's parameters are checked before its
 * handler runs, and only declared methods can be handled.
 */
export class RpcChannel {
  private nextId = 1;
  private readonly pending = new Map<number, { resolve: (value: unknown) => void; reject: (error: Error) => void; timer: NodeJS.Timeout }>();
  private readonly handlers = new Map<string, RpcHandler>();

  constructor(
    private readonly post: (message: RpcCall | RpcReply) => void,
    private readonly methods?: MethodChecks,
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

  /** Feed every `rpc` / `reply` message of the channel here. */
  async receive(message: RpcCall | RpcReply): Promise<void> {
    if (message.fp === 'reply') {
      const waiting = this.pending.get(message.id);
      if (!waiting) return;
      this.pending.delete(message.id);
      clearTimeout(waiting.timer);
      if (message.ok) waiting.resolve(message.result);
      else waiting.reject(new Error(message.error ?? 'remote error'));
      return;
    }
    const handler = this.handlers.get(message.method);
    let reply: RpcReply;
    try {
      if (!handler) throw new Error(`unknown method "${String(message.method).slice(0, 128)}"`);
      const check = this.methods?.get(message.method);
      // No parameters (absent, or null) are checked as an empty object; the handler gets what was sent.
      const params = message.params ?? {};
      if (check && !check.Check(params)) throw new Error(`${message.method}: parameters refused: ${firstError(check, params)}`);
      reply = { fp: 'reply', id: message.id, ok: true, result: await handler(message.params) };
    } catch (error) {
      // A handler may throw anything (`Promise.reject()` included); reading `.message` off it must not fail.
      reply = { fp: 'reply', id: message.id, ok: false, error: error instanceof Error ? error.message : String(error) };
    }
    try {
      this.post(reply);
    } catch {
      // the other side is gone; nobody is waiting for this reply any more
    }
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
