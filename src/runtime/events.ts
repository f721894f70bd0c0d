import { EventEmitter } from 'node:events';
import { SafeEmitter, type AnyEvents } from '../events/safe-emitter.js';
import type { RecycleReason, WorkerStatus } from './status.js';
import type { Logger } from '../logging/logger.js';

export { SafeEmitter };

export type { RecycleReason };

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
  /** SPEC 3.2: a cordon was applied to `worker`; in the primary once per worker, in that worker once. */
  cordon: { value: boolean; worker: number };
  /** SPEC 3.3: a drain was applied to `worker` (for `true`: its connections are gone or the drain timeout passed). */
  drain: { value: boolean; worker: number };
  /** SPEC 3.4: the organizations now shed, `false` once shedding ended; in the primary and in every worker. */
  shed: { organizations: string[] | false };
}

export type ServerEventName = keyof ServerEvents;

/** The listener arguments of each server event: its one payload. */
export type ServerEventArgs = { [E in ServerEventName]: [payload: ServerEvents[E]] };

/** The server's emitter as the runtime sees it: SPEC 1.7 events typed, other names open to applications. */
export type ServerEmitter = SafeEmitter<ServerEventArgs & AnyEvents>;

/** Every name of `ServerEvents` at run time: a `Record`, so an event added to the map cannot be left out here. */
const OWN_EVENTS: Readonly<Record<ServerEventName, true>> = {
  'worker:online': true, 'worker:ready': true, 'worker:exit': true, 'worker:crash': true, 'worker:restart': true, 'worker:draining': true,
  'worker:recycle': true, 'worker:health': true, 'worker:wedged': true, 'worker:quarantined': true, 'fleet:degraded': true,
  'fleet:recovered': true, 'circuit-breaker:tripped': true, 'restart:start': true, 'restart:complete': true, 'shutdown:start': true,
  'shutdown:complete': true, 'organization.active': true, 'organization.inactive': true, status_change: true, cordon: true, drain: true, shed: true,
};

/**
 * Names no envelope is ever emitted as. The server's own events drive its services (`shutdown:complete` closes the
 * mesh, `worker:ready` marks the node serving in the inventory, `organization.*` tells the peers, the dashboard's
 * journal records them): one a caller could raise would be believed. So are EventEmitter's own (`error` with no
 * listener throws) and every namespace the server emits in (`worker:`, `shutdown:`, `organization.`...), with
 * those of the autoscaler, the mesh and the overview.
 */
const RESERVED_NAMES: ReadonlySet<string> = new Set([...Object.keys(OWN_EVENTS), 'error', 'newListener', 'removeListener']);
const RESERVED_PREFIXES: readonly string[] = [
  ...new Set([...Object.keys(OWN_EVENTS).flatMap((name) => /^[^:.]+[:.]/.exec(name)?.[0] ?? []), 'autoscaler:', 'mesh:', 'overview.', 'link:']),
];

/** True for a name only the server itself emits (see `customEvents`). */
export function isReservedEventName(name: string): boolean {
  return RESERVED_NAMES.has(name) || RESERVED_PREFIXES.some((prefix) => name.startsWith(prefix));
}

/** Emits an envelope's method as an event of this process's server object; answers how many listeners heard it. */
export interface CustomEventSink {
  deliver(name: string, ...args: unknown[]): number;
}

/**
 * SPEC 5.4 with the design's custom messages: a method no handler answers is emitted on the server object of each
 * target process (`server.on('custom_worker_event', (data, envelope) => ...)`), safely, unless it is a reserved
 * name. 0 when no listener heard it: the caller is then told `unknown_method`.
 */
export function customEvents(events: ServerEmitter): CustomEventSink {
  return {
    deliver(name, ...args) {
      if (isReservedEventName(name)) return 0;
      const listeners = events.listenerCount(name);
      if (listeners > 0) events.emitSafe(name, ...args);
      return listeners;
    },
  };
}

/** The server's event source: a listener that throws or rejects is logged, and the listeners after it still run. */
export function serverEvents(log: Logger): ServerEmitter {
  return new SafeEmitter((event, error) => log.error({ err: error, event }, 'event listener failed'));
}

type Listener = (...args: any[]) => void;

/**
 * An `EventEmitter` (SPEC 2) whose listeners live on `events`, the emitter the runtime and the services emit
 * on: every listener method is that emitter's, so `server.on`, `events.once(server, ...)` and the runtime's
 * safe emits meet the same listeners.
 */
export class EventSurface extends EventEmitter {
  constructor(protected readonly events: ServerEmitter) {
    super();
  }

  override on<E extends ServerEventName>(event: E, listener: (payload: ServerEvents[E]) => void): this;
  override on(event: string | symbol, listener: Listener): this;
  override on(event: string | symbol, listener: Listener): this {
    this.events.on(event, listener);
    return this;
  }

  override addListener(event: string | symbol, listener: Listener): this {
    return this.on(event, listener);
  }

  override prependListener(event: string | symbol, listener: Listener): this {
    this.events.prependListener(event, listener);
    return this;
  }

  override once<E extends ServerEventName>(event: E, listener: (payload: ServerEvents[E]) => void): this;
  override once(event: string | symbol, listener: Listener): this;
  override once(event: string | symbol, listener: Listener): this {
    this.events.once(event, listener);
    return this;
  }

  override prependOnceListener(event: string | symbol, listener: Listener): this {
    this.events.prependOnceListener(event, listener);
    return this;
  }

  override off<E extends ServerEventName>(event: E, listener: (payload: ServerEvents[E]) => void): this;
  override off(event: string | symbol, listener: Listener): this;
  override off(event: string | symbol, listener: Listener): this {
    this.events.off(event, listener);
    return this;
  }

  override removeListener(event: string | symbol, listener: Listener): this {
    return this.off(event, listener);
  }

  override removeAllListeners(event?: string | symbol): this {
    if (event === undefined) this.events.removeAllListeners();
    else this.events.removeAllListeners(event);
    return this;
  }

  /** Emits like an EventEmitter: a throwing listener throws to the caller (`emitSafe` does not). */
  override emit(event: string | symbol, ...args: unknown[]): boolean {
    return this.events.emit(event, ...args);
  }

  /** Emits to every listener; one that throws or rejects is logged and the others still run. */
  emitSafe<E extends ServerEventName>(event: E, ...args: ServerEventArgs[E]): boolean {
    return this.events.emitSafe(event, ...args);
  }

  override listeners(event: string | symbol): Function[] {
    return this.events.listeners(event);
  }

  override rawListeners(event: string | symbol): Function[] {
    return this.events.rawListeners(event);
  }

  override listenerCount(event: string | symbol, listener?: Function): number {
    return this.events.listenerCount(event, listener);
  }

  override eventNames(): Array<string | symbol> {
    return this.events.eventNames();
  }

  override setMaxListeners(n: number): this {
    this.events.setMaxListeners(n);
    return this;
  }

  override getMaxListeners(): number {
    return this.events.getMaxListeners();
  }
}
