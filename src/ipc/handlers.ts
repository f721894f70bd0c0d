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

/** A worker named by number that its server does not have (it is also missing): the reason, in words. */
export const UnknownWorkerSchema = Type.Object({ server: Type.String(), worker: Type.Integer({ minimum: 0 }), message: Type.String() });

/** What an envelope gathered: one reply per target that answered, the targets missing, and which of those do not exist. */
export const RequestResultSchema = Type.Object({
  id: Type.String(),
  replies: Type.Array(TargetReplySchema),
  missing: Type.Array(MissingTargetSchema),
  unknownWorkers: Type.Optional(Type.Array(UnknownWorkerSchema)),
});
export type RequestResult = Static<typeof RequestResultSchema>;

/**
 * Why a method has no handler in this process: `disabled` (its subsystem is off here; the message names the
 * setting) or `wrong_target` (another process of the server answers it).
 */
export interface AbsentMethod {
  code: 'disabled' | 'wrong_target';
  message: string;
}

/**
 * Where a method with no handler goes: emitted as an event of this process's server object with the envelope's
 * `data` and the envelope. Answers how many listeners heard it (0: none, or a name only the server emits).
 */
export interface EventDelivery {
  deliver(method: string, data: unknown, envelope: DeliveredEnvelope): number;
}

/**
 * Handlers of one process (`server.handle`). A method without a handler is delivered as an event when something
 * listens for it; otherwise it, and a failing handler, answer with an error.
 */
export class HandlerRegistry {
  private readonly handlers = new Map<string, IpcHandler>();
  private readonly absent = new Map<string, AbsentMethod>();

  constructor(private readonly events?: EventDelivery) {}

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

  /** A subsystem's explanation first (it names the setting); then the listeners of the method, if any. */
  private unhandled(envelope: DeliveredEnvelope): { ok: true; result: { event: string; listeners: number } } | { ok: false; error: ReplyError } {
    const error = this.missing(envelope.method);
    if (error.code !== 'unknown_method' || !this.events) return { ok: false, error };
    const listeners = this.events.deliver(envelope.method, envelope.data, envelope);
    return listeners > 0 ? { ok: true, result: { event: envelope.method, listeners } } : { ok: false, error };
  }

  /** Runs the handler and turns every outcome into a reply body; never throws. */
  async run(envelope: DeliveredEnvelope): Promise<{ ok: true; result: unknown } | { ok: false; error: ReplyError }> {
    const handler = this.handlers.get(envelope.method);
    if (!handler) return this.unhandled(envelope);
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
