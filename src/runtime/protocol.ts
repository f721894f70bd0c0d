import { Type, type Static, type TSchema } from '@sinclair/typebox';
import { lazyCheck, type SchemaCheck } from '../schema/lazy-check.js';
import { RECYCLE_REASONS, WORKER_STATUSES } from './status.js';
import { ReplyErrorSchema, RequestResultSchema, TargetReplySchema } from '../ipc/handlers.js';

/**
 * The primary ⇄ worker protocol, checked where a message arrives: every internal message (`fp`) by its kind, and
 * every request (`rpc`) by the parameters its method declares. What does not match is refused there and never
 * reaches a handler. Fields a side does not read may be added (`additionalProperties`); those it reads are checked.
 */
const open = { additionalProperties: true };
const Sequence = Type.Integer({ minimum: 0, maximum: Number.MAX_SAFE_INTEGER });
const Method = Type.String({ minLength: 1, maxLength: 128 });

const RpcCall = Type.Object({ fp: Type.Literal('rpc'), id: Sequence, method: Method, params: Type.Optional(Type.Unknown()) }, open);
const RpcReply = Type.Object(
  {
    fp: Type.Literal('reply'),
    id: Sequence,
    ok: Type.Boolean(),
    result: Type.Optional(Type.Unknown()),
    error: Type.Optional(Type.String({ maxLength: 65_536 })),
    code: Type.Optional(Type.String({ maxLength: 64 })),
    field: Type.Optional(Type.String({ maxLength: 256 })),
  },
  open,
);
const shared = { rpc: RpcCall, reply: RpcReply };
const Bytes = Type.Number({ minimum: 0 });

/** What a worker may send its primary, by `fp`. */
const FROM_WORKER: Readonly<Record<string, TSchema>> = {
  ...shared,
  boot: Type.Object({ fp: Type.Literal('boot') }, open),
  listening: Type.Object({ fp: Type.Literal('listening') }, open),
  ready: Type.Object({ fp: Type.Literal('ready') }, open),
  taken: Type.Object({ fp: Type.Literal('taken'), id: Sequence }, open),
  status: Type.Object({ fp: Type.Literal('status'), status: Type.Union(WORKER_STATUSES.map((status) => Type.Literal(status))) }, open),
  health: Type.Object({ fp: Type.Literal('health'), rss: Bytes, heapUsed: Bytes, lagMs: Type.Number({ minimum: 0 }) }, open),
  ack: Type.Object({ fp: Type.Literal('ack'), signal: Type.Optional(Type.String({ maxLength: 32 })) }, open),
};

/** What a primary may send its workers, by `fp`. */
const FROM_PRIMARY: Readonly<Record<string, TSchema>> = {
  ...shared,
  boot: Type.Object({ fp: Type.Literal('boot'), config: Type.Object({}, open), manager: Type.Object({}, open) }, open),
  conn: Type.Object({ fp: Type.Literal('conn'), secure: Type.Boolean(), id: Sequence }, open),
  shutdown: Type.Object({ fp: Type.Literal('shutdown'), reason: Type.String({ maxLength: 1_024 }), type: Type.Optional(Type.String({ maxLength: 64 })) }, open),
  fleet: Type.Object({ fp: Type.Literal('fleet'), ready: Type.Boolean() }, open),
};

function checksOf(schemas: Readonly<Record<string, TSchema>>): ReadonlyMap<string, SchemaCheck<TSchema>> {
  return new Map(Object.entries(schemas).map(([kind, schema]) => [kind, lazyCheck(schema)]));
}

const fromWorker = checksOf(FROM_WORKER);
const fromPrimary = checksOf(FROM_PRIMARY);

/** Why a checked value does not match, on one line: the first error's path and message. */
export function firstError(check: SchemaCheck<TSchema>, value: unknown): string {
  const error = check.Errors(value).First();
  return error ? `${error.path || '/'}: ${error.message}` : 'does not match';
}

function refusal(checks: ReadonlyMap<string, SchemaCheck<TSchema>>, message: { fp: string }): string | undefined {
  const kind = message.fp;
  const check = checks.get(kind);
  if (!check) return `unknown kind "${kind.slice(0, 32)}"`;
  return check.Check(message) ? undefined : `"${kind}" ${firstError(check, message)}`;
}

/** Undefined when an internal message from a worker is well formed, else why it is refused. */
export const refuseFromWorker = (message: { fp: string }): string | undefined => refusal(fromWorker, message);

/** Undefined when an internal message from the primary is well formed, else why it is refused. */
export const refuseFromPrimary = (message: { fp: string }): string | undefined => refusal(fromPrimary, message);

/** No parameters (none sent, or null, are checked as `{}`: see `RpcChannel`). */
const Nothing = Type.Object({}, open);
const Toggle = Type.Object({ value: Type.Boolean() }, open);
/** Shed organizations, as `shed` takes them: what the primary accepts, it can always push to its workers. */
const OrganizationIds = Type.Array(Type.String({ minLength: 1, maxLength: 128 }));
const OrganizationId = Type.String({ minLength: 1, maxLength: 128 });
const Revision = Type.Integer({ minimum: 0 });
// SPEC 4.2: a key's and a value's rules are checked by the storage itself (`checkKey`, `toStoredValue`), which
// answers the precise storage error; here only the shape.
const StorageKey = Type.String();
const StorageValue = Type.Unknown();

/** The requests a primary answers its workers, with their parameters. */
export const PRIMARY_METHODS = {
  'primary.health': Nothing,
  'primary.metrics': Nothing,
  'primary.restartWorkers': Type.Object({ reason: Type.Optional(Type.String({ maxLength: 4_096 })) }, open),
  'primary.setReady': Nothing,
  'primary.setNotReady': Nothing,
  'primary.resetCircuitBreaker': Nothing,
  'primary.recycleWorker': Type.Object({ pid: Type.Optional(Type.Integer({ minimum: 1 })) }, open),
  'primary.shed': Type.Object({ organizations: OrganizationIds }, open),
  // `whenAccepted`: a control envelope's change, answered as the readiness grace begins rather than after it.
  'primary.workerState': Type.Object({ action: Type.Union([Type.Literal('cordon'), Type.Literal('drain')]), value: Type.Boolean(), whenAccepted: Type.Optional(Type.Boolean()) }, open),
  // Checked by their handlers, with the errors their callers are promised: the mesh message (`src/mesh/api.ts`),
  // the failure report (`src/auth/authorize.ts`).
  'primary.mesh.send': Type.Unknown(),
  'primary.mesh.peers': Nothing,
  'primary.auth.failure': Type.Unknown(),
  'primary.tls.https': Nothing,
  // SPEC 5: a worker's envelope, routed by the primary; `request` gathers the replies, `send` (a notification) not.
  // The envelope itself is checked by the router, with the errors SPEC 5 gives.
  'primary.ipc.send': Type.Object({ envelope: Type.Unknown() }, open),
  'primary.ipc.request': Type.Object({ envelope: Type.Unknown(), timeoutMs: Type.Integer({ minimum: 1, maximum: 120_000 }) }, open),
  // SPEC 4.2: a worker's write, answered with the revision its replica must reach before the write resolves; and
  // the snapshot it asks for after a revision gap (sent as `worker.storage.snapshot` before the answer).
  'primary.storage.write': Type.Union([
    Type.Object({ op: Type.Literal('set'), key: StorageKey, value: StorageValue }),
    Type.Object({ op: Type.Literal('delete'), key: StorageKey }),
    Type.Object({ op: Type.Literal('clear') }),
  ]),
  'primary.storage.sync': Nothing,
  // SPEC 5.5: a worker's report to the organization map (a request served, a WebSocket opened or closed).
  'primary.organization': Type.Object({ kind: Type.Union([Type.Literal('touch'), Type.Literal('open'), Type.Literal('close')]), organization_id: OrganizationId }, open),
} satisfies Record<string, TSchema>;

/** The requests a worker answers its primary, with their parameters. */
export const WORKER_METHODS = {
  'worker.cordon': Toggle,
  'worker.drain': Toggle,
  'worker.status': Nothing,
  'worker.metrics': Nothing,
  // Checked by the HTTPS identity (`src/boot/tls.ts`).
  'worker.tls.https': Type.Unknown(),
  // SPEC 5: an envelope the primary routed to this worker, answered with its handler's outcome.
  'worker.ipc.deliver': Type.Object({ envelope: Type.Object({ method: Method, meta: Type.Object({}, open) }, open) }, open),
  // SPEC 3.4: the organizations shed, pushed when the worker starts listening (`initial`) and at each change.
  'worker.shed': Type.Object({ organizations: OrganizationIds, initial: Type.Optional(Type.Boolean()) }, open),
  // SPEC 4.2: the primary's entries, pushed when the worker starts listening and after a sync; then every
  // mutation in revision order, on the same ordered channel.
  'worker.storage.snapshot': Type.Object({ revision: Revision, entries: Type.Array(Type.Tuple([StorageKey, StorageValue])) }),
  'worker.storage.mutation': Type.Union([
    Type.Object({ kind: Type.Literal('set'), revision: Revision, key: StorageKey, value: StorageValue }),
    Type.Object({ kind: Type.Literal('delete'), revision: Revision, key: StorageKey }),
    Type.Object({ kind: Type.Literal('clear'), revision: Revision }),
  ]),
  // SPEC 5.5: an organization turned active or inactive in the primary's map.
  'worker.organization': Type.Object({ kind: Type.Union([Type.Literal('active'), Type.Literal('inactive')]), organization_id: OrganizationId }, open),
} satisfies Record<string, TSchema>;

export type PrimaryMethod = keyof typeof PRIMARY_METHODS;
export type WorkerMethod = keyof typeof WORKER_METHODS;

const Anything = Type.Unknown();
const Status = Type.Union(WORKER_STATUSES.map((status) => Type.Literal(status)));
/** SPEC 5: a target's handler outcome, as a worker answers a delivery. */
const DeliveryOutcome = Type.Pick(TargetReplySchema, ['ok', 'result', 'error']);
const Count = Type.Integer({ minimum: 0 });
const Measured = Type.Union([Type.Number({ minimum: 0 }), Type.Null()]);
/** SPEC 1.4: the workers' side of `getFleetHealth()` (`FleetHealth` in `pool.ts`). */
const FleetHealth = Type.Object({
  target: Count,
  active: Count,
  quarantined: Count,
  breaker: Type.Object({ count: Count, tripped: Type.Boolean() }),
  restartsPending: Count,
  workers: Type.Array(
    Type.Object({
      worker: Count,
      pid: Count,
      status: Status,
      retiring: Type.Union([...RECYCLE_REASONS.map((reason) => Type.Literal(reason)), Type.Literal('shutdown'), Type.Null()]),
      uptimeMs: Type.Number({ minimum: 0 }),
      rss: Measured,
      heapUsed: Measured,
      eventLoopLagMs: Measured,
    }),
  ),
});
/** A process's metrics as prom-client reads them out (`getMetricsAsJSON`), the fields the primary aggregates. */
const MetricJson = Type.Object(
  {
    name: Type.String(),
    help: Type.String(),
    type: Type.String(),
    aggregator: Type.String(),
    // A value that is not a finite number (NaN) travels as null in the channel's JSON.
    values: Type.Array(Type.Object({ value: Type.Union([Type.Number(), Type.Null()]), labels: Type.Record(Type.String(), Type.Unknown()) }, open)),
  },
  open,
);
const MeshReply = Type.Object({ server: Type.String(), ok: Type.Boolean(), result: Type.Optional(Anything), error: Type.Optional(ReplyErrorSchema) }, open);
const PeerInfo = Type.Object(
  { server: Type.String(), direction: Type.Union([Type.Literal('in'), Type.Literal('out')]), publicUrl: Type.Optional(Type.String()), organizations: Type.Array(Type.String()) },
  open,
);

/**
 * What each primary method answers, checked by the worker that asked before it reads the answer. `Anything`
 * where nothing is read, or where the caller hands the answer to a check of its own (named beside it).
 */
export const PRIMARY_RESULTS = {
  'primary.health': Type.Object({ fleet: FleetHealth }, open),
  'primary.metrics': Type.String(),
  'primary.restartWorkers': Type.Object({ started: Type.Boolean() }, open),
  'primary.setReady': Anything,
  'primary.setNotReady': Anything,
  'primary.resetCircuitBreaker': Anything,
  'primary.recycleWorker': Type.Object({ recycling: Type.Integer({ minimum: 0 }) }, open),
  'primary.shed': OrganizationIds,
  'primary.workerState': Type.Union([Type.Array(Anything), Type.Object({ accepted: Type.Literal(true), effectiveInMs: Type.Integer({ minimum: 0 }) }, open)]),
  'primary.mesh.send': MeshReply,
  'primary.mesh.peers': Type.Array(PeerInfo),
  'primary.auth.failure': Type.Integer({ minimum: 0 }),
  // The HTTPS identity checks the pair (`src/boot/tls.ts`).
  'primary.tls.https': Anything,
  'primary.ipc.send': Anything,
  'primary.ipc.request': RequestResultSchema,
  'primary.storage.write': Type.Object({ revision: Revision, result: Type.Union([Type.Integer(), Type.Boolean()]) }, open),
  'primary.storage.sync': Type.Object({ revision: Revision }, open),
  'primary.organization': Anything,
} satisfies Record<PrimaryMethod, TSchema>;

/** What each worker method answers, checked by the primary before it reads the answer. */
export const WORKER_RESULTS = {
  'worker.cordon': Status,
  'worker.drain': Type.Object({ status: Status, remaining: Type.Integer({ minimum: 0 }) }, open),
  'worker.status': Type.Object({ worker: Type.Integer({ minimum: 0 }), pid: Type.Integer({ minimum: 1 }), status: Status }, open),
  'worker.metrics': Type.Array(MetricJson),
  // The HTTPS identity checks what it reads.
  'worker.tls.https': Anything,
  'worker.ipc.deliver': DeliveryOutcome,
  'worker.shed': Anything,
  'worker.storage.snapshot': Anything,
  'worker.storage.mutation': Anything,
  'worker.organization': Anything,
} satisfies Record<WorkerMethod, TSchema>;

/** A side's methods as the other side calls them: what each takes and what it answers. */
export type MethodTypes = Record<string, { params: unknown; result: unknown }>;
type TypesOf<Params extends Record<string, TSchema>, Results extends Record<keyof Params, TSchema>> = {
  [M in keyof Params & string]: { params: Static<Params[M]>; result: Static<Results[M]> };
};
/** One process's metrics on the wire, as its primary aggregates them. */
export type MetricsJson = Static<(typeof WORKER_RESULTS)['worker.metrics']>;

/** The primary's methods, as a worker calls them. */
export type PrimaryApi = TypesOf<typeof PRIMARY_METHODS, typeof PRIMARY_RESULTS>;
/** A worker's methods, as its primary calls them. */
export type WorkerApi = TypesOf<typeof WORKER_METHODS, typeof WORKER_RESULTS>;

/** A side's declared methods, each with its compiled check (of its parameters, or of its answer). */
export type MethodChecks = ReadonlyMap<string, SchemaCheck<TSchema>>;

export const primaryMethodChecks: MethodChecks = checksOf(PRIMARY_METHODS);
export const workerMethodChecks: MethodChecks = checksOf(WORKER_METHODS);
export const primaryResultChecks: MethodChecks = checksOf(PRIMARY_RESULTS);
export const workerResultChecks: MethodChecks = checksOf(WORKER_RESULTS);
