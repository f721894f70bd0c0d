import { Type, type Static } from '@sinclair/typebox';

/** What an entry of the journal is about; the dashboard filters on it. */
export const EVENT_KINDS = ['status', 'crash', 'restart', 'recycle', 'quarantine', 'breaker', 'capacity', 'rolling', 'shutdown', 'shed', 'organization', 'mesh', 'autoscaler'] as const;
export type EventKind = (typeof EVENT_KINDS)[number];

/** One thing that happened to a server, as an operator reads it. */
export const FleetEventSchema = Type.Object(
  {
    server: Type.String({ maxLength: 128 }),
    /** Per server, from 1, in the order the primary saw the events. */
    seq: Type.Integer({ minimum: 1 }),
    /** Epoch milliseconds. */
    at: Type.Number(),
    kind: Type.Union(EVENT_KINDS.map((kind) => Type.Literal(kind))),
    /** The worker number, when the event is about one worker. */
    worker: Type.Optional(Type.Integer({ minimum: 0 })),
    message: Type.String({ maxLength: 512 }),
  },
  { additionalProperties: false },
);
export type FleetEvent = Static<typeof FleetEventSchema>;

export type FleetEventInput = Omit<FleetEvent, 'server' | 'seq' | 'at'>;

/**
 * The primary's short memory of its server's events (status changes, crashes, restarts, cordon, shed, mesh
 * links, autoscaler actions): a ring of the last `capacity` entries, each numbered, so a reader that lost its
 * live stream asks for what came after the last number it saw.
 */
export class EventJournal {
  private readonly entries: FleetEvent[] = [];
  private nextSeq = 1;
  private readonly listeners = new Set<(event: FleetEvent) => void>();

  constructor(
    private readonly server: string,
    private readonly now: () => number,
    private readonly capacity = 500,
  ) {}

  /** The number of the newest entry (0 before the first). */
  get latest(): number {
    return this.nextSeq - 1;
  }

  append(input: FleetEventInput): FleetEvent {
    const event: FleetEvent = { server: this.server, seq: this.nextSeq++, at: this.now(), ...input, message: input.message.slice(0, 512) };
    this.entries.push(event);
    if (this.entries.length > this.capacity) this.entries.shift();
    for (const listener of this.listeners) listener(event);
    return event;
  }

  /** Entries numbered after `seq`, oldest first, at most `limit` (the newest of them). */
  since(seq: number, limit = this.capacity): FleetEvent[] {
    const first = this.entries.findIndex((event) => event.seq > seq);
    if (first < 0) return [];
    return this.entries.slice(Math.max(first, this.entries.length - limit));
  }

  /** Told of every entry appended from now on; the returned function stops it. */
  onAppend(listener: (event: FleetEvent) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }
}
