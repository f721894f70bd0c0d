import { Type, type Static } from '@sinclair/typebox';
import { FleetEventSchema } from './journal.js';

const Count = Type.Integer({ minimum: 0 });
const Figure = Type.Number({ minimum: 0 });

/** What `overview.worker` answers in each worker: the figures only the worker itself knows. */
export const WorkerFiguresSchema = Type.Object({
  worker: Count,
  pid: Count,
  status: Type.String({ maxLength: 32 }),
  uptimeMs: Figure,
  connections: Count,
  /** HTTP requests answered since the process started. */
  requests: Count,
});
export type WorkerFigures = Static<typeof WorkerFiguresSchema>;

export const OrganizationPresenceSchema = Type.Object({
  organization_id: Type.String({ maxLength: 128 }),
  /** Workers of this server serving it. */
  workers: Type.Array(Count),
  /** Its open WebSockets on this server. */
  sockets: Count,
});

/** One worker process as the Server view lists it. */
export const ProcessViewSchema = Type.Object({
  worker: Count,
  pid: Count,
  status: Type.String({ maxLength: 32 }),
  /** Why it is being taken out (recycle, rolling restart, shutdown), or null. */
  retiring: Type.Union([Type.String({ maxLength: 32 }), Type.Null()]),
  uptimeMs: Figure,
  /** Restarts of its slot after crashes since the primary started. */
  restarts: Count,
  quarantined: Type.Boolean(),
  lastCrash: Type.Union([Type.Object({ at: Type.Number(), pid: Count, exit: Type.String({ maxLength: 64 }) }), Type.Null()]),
  rssBytes: Type.Union([Figure, Type.Null()]),
  heapUsedBytes: Type.Union([Figure, Type.Null()]),
  eventLoopLagMs: Type.Union([Figure, Type.Null()]),
  connections: Type.Union([Count, Type.Null()]),
  requestsPerSecond: Type.Union([Figure, Type.Null()]),
});
export type ProcessView = Static<typeof ProcessViewSchema>;

const SeriesSchema = Type.Object({ at: Type.Array(Type.Number()), values: Type.Record(Type.String(), Type.Array(Type.Number())) });

/** A server as the Cluster view lists it: `overview.server` with `processes: false`. */
export const ServerSummarySchema = Type.Object({
  server: Type.String({ maxLength: 128 }),
  cluster: Type.String({ maxLength: 128 }),
  host: Type.String({ maxLength: 256 }),
  version: Type.String({ maxLength: 64 }),
  pid: Count,
  status: Type.String({ maxLength: 32 }),
  /** What `/readyz` answers on a serving worker. */
  ready: Type.Boolean(),
  startedAt: Type.Number(),
  uptimeMs: Figure,
  workers: Type.Object({
    target: Count,
    active: Count,
    cordoned: Count,
    quarantined: Count,
    restartsPending: Count,
    breaker: Type.Object({ count: Count, tripped: Type.Boolean() }),
  }),
  connections: Count,
  requestsPerSecond: Figure,
  /** The primary's and every worker's resident memory. */
  rssBytes: Figure,
  shed: Type.Array(Type.String({ maxLength: 128 })),
  organizations: Type.Array(OrganizationPresenceSchema),
  /** `autoscaler.status` of this server, or null where the autoscaler is off. */
  autoscaler: Type.Union([Type.Unknown(), Type.Null()]),
  /** The number of the newest entry of this server's journal. */
  latestEvent: Count,
});
export type ServerSummary = Static<typeof ServerSummarySchema>;

export type ServerSnapshot = ServerSummary & {
  processes?: ProcessView[];
  /** Per worker pid (and `server` for the server's own figures): samples after `historySince`. */
  history?: Record<string, Static<typeof SeriesSchema>>;
};

/** The argument of `overview.server`. */
export const ServerQuerySchema = Type.Object(
  {
    processes: Type.Optional(Type.Boolean({ description: 'List every worker process (default true)' })),
    historySince: Type.Optional(Type.Number({ minimum: 0, description: 'Samples taken after this epoch ms (0: the last 10 minutes); no history without it' })),
  },
  { additionalProperties: false },
);

/** The argument of `overview.events`: per server, the last entry number already seen. */
export const EventsQuerySchema = Type.Object(
  {
    since: Type.Optional(Type.Union([Type.Integer({ minimum: 0 }), Type.Record(Type.String({ maxLength: 128 }), Type.Integer({ minimum: 0 }))])),
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 500 })),
  },
  { additionalProperties: false },
);

export const EventsReplySchema = Type.Object({ server: Type.String(), latest: Count, events: Type.Array(FleetEventSchema) });

/** The argument of `overview.cluster`. */
export const ClusterQuerySchema = Type.Object({ timeoutMs: Type.Optional(Type.Integer({ minimum: 100, maximum: 10_000 })) }, { additionalProperties: false });
