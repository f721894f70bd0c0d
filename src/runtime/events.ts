import { SafeEmitter, type AnyEvents } from '../events/safe-emitter.js';
import type { WorkerStatus } from './status.js';
import type { Logger } from '../logging/logger.js';

export { SafeEmitter };

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
  /** `reason`: why a worker is `stopping` (its shutdown's reason, e.g. `handover`). */
  status_change: { worker?: number; oldStatus: WorkerStatus | string; newStatus: WorkerStatus | string; reason?: string };
}

export type ServerEventName = keyof ServerEvents;

/** The listener arguments of each server event: its one payload. */
export type ServerEventArgs = { [E in ServerEventName]: [payload: ServerEvents[E]] };

/** The server's emitter as the runtime sees it: SPEC 1.7 events typed, other names open to applications. */
export type ServerEmitter = SafeEmitter<ServerEventArgs & AnyEvents>;

/** The server's event source: a listener that throws or rejects is logged, and the listeners after it still run. */
export function serverEvents(log: Logger): ServerEmitter {
  return new SafeEmitter((event, error) => log.error({ err: error, event }, 'event listener failed'));
}
