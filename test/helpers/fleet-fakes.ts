import { pino } from 'pino';
import type { ServerEventArgs, ServerEventName, ServerEvents } from '../../src/runtime/events.js';
import type { FleetEvents } from '../../src/runtime/fleet/worker-record.js';

export const silentLog = pino({ level: 'silent' });

export interface EmittedEvent {
  event: ServerEventName;
  payload: unknown;
}

/** The fleet's event sink, recording what was emitted. */
export class RecordedEvents implements FleetEvents {
  readonly emitted: EmittedEvent[] = [];

  emitSafe<E extends ServerEventName>(event: E, ...[payload]: ServerEventArgs[E]): boolean {
    this.emitted.push({ event, payload });
    return true;
  }

  of<E extends ServerEventName>(event: E): Array<ServerEvents[E]> {
    return this.emitted.filter((emitted) => emitted.event === event).map((emitted) => emitted.payload as ServerEvents[E]);
  }

  names(): ServerEventName[] {
    return this.emitted.map((emitted) => emitted.event);
  }
}
