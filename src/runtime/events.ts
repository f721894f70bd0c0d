import { EventEmitter } from 'node:events';
import type { WorkerStatus } from './status.js';

export type RecycleReason = 'maxAge' | 'rss' | 'wedged' | 'lag' | 'restart';

/** SPEC 1.7: the typed events of the server object. */
export interface ServerEvents {
  'worker:online': { workerId: number; pid: number };
  'worker:ready': { workerId: number; pid: number };
  'worker:exit': { workerId: number; pid: number; code: number | null; signal: string | null; graceful: boolean };
  'worker:crash': { workerId: number; pid: number; code: number | null; signal: string | null; bootFailure: boolean };
  'worker:restart': { workerId: number; pid: number; attempt: number; delayMs: number };
  'worker:draining': { workerId: number; pid: number; reason: string };
  'worker:recycle': { workerId: number; pid: number; reason: RecycleReason };
  'worker:health': { workerId: number; pid: number; rss: number; heapUsed: number; eventLoopLagMs: number };
  'worker:wedged': { workerId: number; pid: number; silentMs: number };
  'worker:quarantined': { workerId: number; consecutiveBootFailures: number };
  'fleet:degraded': { target: number; active: number };
  'fleet:recovered': { target: number; active: number; degradedDurationMs: number };
  'circuit-breaker:tripped': { count: number; windowMs: number };
  'restart:start': { workers: number[]; reason: string };
  'restart:complete': { workers: number[]; reason: string; durationMs: number };
  'shutdown:start': { signal: string };
  'shutdown:complete': { signal: string; durationMs: number };
  'organization.active': { organization_id: string };
  'organization.inactive': { organization_id: string };
  status_change: { worker?: number; oldStatus: WorkerStatus | string; newStatus: WorkerStatus | string };
}

export type ServerEventName = keyof ServerEvents;

/**
 * An EventEmitter whose listeners cannot hurt the emitter: a listener that throws (or rejects) is logged and
 * the remaining listeners still run. The primary emits from its supervision paths, which must never die.
 */
export class SafeEmitter extends EventEmitter {
  constructor(private readonly onListenerError: (event: string, error: unknown) => void) {
    super({ captureRejections: false });
  }

  emitSafe<E extends ServerEventName>(event: E, payload: ServerEvents[E]): boolean {
    const listeners = this.rawListeners(event);
    for (const listener of listeners) {
      try {
        const result = (listener as (value: unknown) => unknown).call(this, payload);
        if (result && typeof (result as Promise<unknown>).then === 'function') {
          (result as Promise<unknown>).then(undefined, (error) => this.onListenerError(event, error));
        }
      } catch (error) {
        this.onListenerError(event, error);
      }
    }
    return listeners.length > 0;
  }
}
