import { Type, type Static } from '@sinclair/typebox';
import { IpcError, type DeliveredEnvelope } from './envelope.js';

export type IpcHandler = (data: unknown, envelope: DeliveredEnvelope) => unknown | Promise<unknown>;

/** A handler's failure as it travels: its error code and message. */
export const ReplyErrorSchema = Type.Object({ code: Type.String({ maxLength: 64 }), message: Type.String() });
export type ReplyError = Static<typeof ReplyErrorSchema>;

/** A target's answer: SPEC 5.1 `{ server, worker, ok, result | error }` (worker 0 = the primary). */
export const TargetReplySchema = Type.Object({
  server: Type.String(),
  worker: Type.Integer({ minimum: 0 }),
  ok: Type.Boolean(),
  result: Type.Optional(Type.Unknown()),
  error: Type.Optional(ReplyErrorSchema),
});
export type TargetReply = Static<typeof TargetReplySchema>;

/** A target that did not answer in time (or went away first). */
export const MissingTargetSchema = Type.Object({ server: Type.String(), worker: Type.Optional(Type.Integer({ minimum: 0 })) });

/** What an envelope gathered: one reply per target that answered, and the targets missing. */
export const RequestResultSchema = Type.Object({ id: Type.String(), replies: Type.Array(TargetReplySchema), missing: Type.Array(MissingTargetSchema) });
export type RequestResult = Static<typeof RequestResultSchema>;

/**
 * Why a method has no handler in this process: `disabled` (its subsystem is off here; the message names the
 * setting) or `wrong_target` (another process of the server answers it).
 */
export interface AbsentMethod {
  code: 'disabled' | 'wrong_target';
  message: string;
}

/** Handlers of one process (`server.handle`). Unknown methods and failing handlers answer with an error. */
export class HandlerRegistry {
  private readonly handlers = new Map<string, IpcHandler>();
  private readonly absent = new Map<string, AbsentMethod>();

  handle(method: string, handler: IpcHandler): void {
    if (!/^[A-Za-z][A-Za-z0-9_.:-]*$/.test(method) || method.length > 128) throw new TypeError(`invalid method name "${method}"`);
    this.handlers.set(method, handler);
  }

  has(method: string): boolean {
    return this.handlers.has(method);
  }

  /**
   * What a method of `namespace` (`autoscaler` covers `autoscaler.status`) answers while no handler is
   * registered for it: a subsystem that is off, or that runs in another process, is named instead of
   * `unknown_method`. A handler registered for the method always wins.
   */
  explainAbsent(namespace: string, why: AbsentMethod): void {
    this.absent.set(namespace, why);
  }

  private missing(method: string): ReplyError {
    for (let candidate = method; ; candidate = candidate.slice(0, candidate.lastIndexOf('.'))) {
      const why = this.absent.get(candidate);
      if (why) return { code: why.code, message: `${method}: ${why.message}` };
      if (!candidate.includes('.')) break;
    }
    return { code: 'unknown_method', message: `no handler for "${method}"` };
  }

  /** Runs the handler and turns every outcome into a reply body; never throws. */
  async run(envelope: DeliveredEnvelope): Promise<{ ok: true; result: unknown } | { ok: false; error: ReplyError }> {
    const handler = this.handlers.get(envelope.method);
    if (!handler) return { ok: false, error: this.missing(envelope.method) };
    try {
      const result = await handler(envelope.data, envelope);
      return { ok: true, result: result === undefined ? null : result };
    } catch (error) {
      if (error instanceof IpcError && error.code !== 'handler_failed') return { ok: false, error: { code: error.code, message: error.message } };
      const message = error instanceof Error ? error.message : String(error);
      return { ok: false, error: { code: 'handler_failed', message } };
    }
  }
}
