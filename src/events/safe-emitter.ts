import { EventEmitter } from 'node:events';

/** An event map: each event name to the arguments its listeners receive. */
export type EventMap<Events> = { [E in keyof Events]: unknown[] };

/** A map that names no events: any name, any arguments (for emitters that type their events themselves). */
export type AnyEvents = Record<string | symbol, any[]>;

export type EventListener<Events extends EventMap<Events>, E extends keyof Events> = (...args: Events[E]) => unknown;

/** Where a listener's exception goes (a logger), instead of into the code that emitted. */
export type ListenerErrorSink = (event: string, error: unknown) => void;

/**
 * An EventEmitter whose listeners cannot hurt the emitter: a listener that throws (or rejects) is reported to
 * the sink and the remaining listeners still run. Every event source uses it (the server's supervision
 * events, storage, the mesh): they emit from paths that must never die of an observer's bug.
 */
export class SafeEmitter<Events extends EventMap<Events> = AnyEvents> extends EventEmitter {
  constructor(private readonly onListenerError: ListenerErrorSink) {
    super({ captureRejections: false });
  }

  override on<E extends keyof Events & (string | symbol)>(event: E, listener: EventListener<Events, E>): this {
    return super.on(event, listener as (...args: unknown[]) => void);
  }

  override once<E extends keyof Events & (string | symbol)>(event: E, listener: EventListener<Events, E>): this {
    return super.once(event, listener as (...args: unknown[]) => void);
  }

  override off<E extends keyof Events & (string | symbol)>(event: E, listener: EventListener<Events, E>): this {
    return super.off(event, listener as (...args: unknown[]) => void);
  }

  /** Calls every listener of `event` with `args`; true when there was one. Never throws. */
  emitSafe<E extends keyof Events & (string | symbol)>(event: E, ...args: Events[E]): boolean {
    const listeners = this.rawListeners(event);
    for (const listener of listeners) {
      try {
        const result = (listener as (...values: unknown[]) => unknown).apply(this, args);
        if (result && typeof (result as Promise<unknown>).then === 'function') {
          (result as Promise<unknown>).then(undefined, (error: unknown) => this.onListenerError(String(event), error));
        }
      } catch (error) {
        this.onListenerError(String(event), error);
      }
    }
    return listeners.length > 0;
  }
}
