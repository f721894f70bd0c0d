import { Type, type Static } from '@sinclair/typebox';
import { Value } from '@sinclair/typebox/value';
import { FleetplaneError } from '../errors.js';

/**
 * Set by the old primary in the environment of the primary it starts: "you are a successor, your
 * predecessor is on the IPC channel". Not part of the public configuration; removed at once by the successor
 * so its workers, and its own successor later, never see it.
 */
export const HANDOVER_ENV = 'FLEETPLANE_INTERNAL_HANDOVER';

/** The listening sockets a hand-over moves, by role. */
export const SOCKET_ROLES = ['http', 'https', 'mesh'] as const;
export type SocketRole = (typeof SOCKET_ROLES)[number];

const Address = Type.Object({ host: Type.String({ maxLength: 256 }), port: Type.Integer({ minimum: 1, maximum: 65_535 }) });
const Role = Type.Union(SOCKET_ROLES.map((role) => Type.Literal(role)));
const Reason = Type.String({ maxLength: 4_000 });

/** What the old primary hands the new one before any socket: who it is, where it listens, its state. */
const SeedSchema = Type.Object({
  fp: Type.Literal('handover'),
  type: Type.Literal('seed'),
  pid: Type.Integer(),
  version: Type.String({ maxLength: 128 }),
  listening: Type.Object({ http: Type.Optional(Address), https: Type.Optional(Address), mesh: Type.Optional(Address) }),
  /** The reactive storage as of this message: the old primary holds every write from here on. */
  storage: Type.Object({ revision: Type.Integer({ minimum: 0 }), entries: Type.Array(Type.Tuple([Type.String(), Type.Unknown()])) }),
  shed: Type.Array(Type.String({ minLength: 1, maxLength: 128 })),
});
export type Seed = Static<typeof SeedSchema>;

/** Old primary → new primary. */
const PredecessorSchema = Type.Union([
  SeedSchema,
  /** Carries one listening socket's handle. */
  Type.Object({ fp: Type.Literal('handover'), type: Type.Literal('socket'), role: Role }),
  /** The commit point: the new primary may take over; the old one is told when it has. */
  Type.Object({ fp: Type.Literal('handover'), type: Type.Literal('go') }),
  /** A storage write of the old primary's draining workers, made on the new primary's authority. */
  Type.Object({ fp: Type.Literal('handover'), type: Type.Literal('store'), id: Type.Integer({ minimum: 1 }), draft: Type.Unknown() }),
  /** The old primary's workers are gone: nothing more comes on this channel. */
  Type.Object({ fp: Type.Literal('handover'), type: Type.Literal('released') }),
]);
export type PredecessorMessage = Static<typeof PredecessorSchema>;

/** New primary → old primary. */
const SuccessorSchema = Type.Union([
  Type.Object({ fp: Type.Literal('handover'), type: Type.Literal('hello'), pid: Type.Integer(), version: Type.String({ maxLength: 128 }) }),
  /** The seed fits this primary's configuration: send the sockets. */
  Type.Object({ fp: Type.Literal('handover'), type: Type.Literal('sockets') }),
  Type.Object({ fp: Type.Literal('handover'), type: Type.Literal('progress'), ready: Type.Integer({ minimum: 0 }), target: Type.Integer({ minimum: 0 }) }),
  /** Every worker is ready: asks for `go`. */
  Type.Object({ fp: Type.Literal('handover'), type: Type.Literal('ready') }),
  /** Accepting on every socket; the control socket and the pid file are this primary's. */
  Type.Object({ fp: Type.Literal('handover'), type: Type.Literal('taken') }),
  Type.Object({ fp: Type.Literal('handover'), type: Type.Literal('failed'), reason: Reason }),
  Type.Object({ fp: Type.Literal('handover'), type: Type.Literal('stored'), id: Type.Integer({ minimum: 1 }), ok: Type.Literal(true), result: Type.Union([Type.Integer(), Type.Boolean()]) }),
  Type.Object({ fp: Type.Literal('handover'), type: Type.Literal('stored'), id: Type.Integer({ minimum: 1 }), ok: Type.Literal(false), message: Reason }),
]);
export type SuccessorMessage = Static<typeof SuccessorSchema>;

export const isPredecessorMessage = (message: unknown): message is PredecessorMessage => Value.Check(PredecessorSchema, message);
export const isSuccessorMessage = (message: unknown): message is SuccessorMessage => Value.Check(SuccessorSchema, message);

/** A hand-over refused (another runs, a rolling restart runs, ...) or aborted before the commit point. */
export class HandoverError extends FleetplaneError {
  override readonly name = 'HandoverError';
  constructor(
    code: 'refused' | 'aborted',
    message: string,
    options?: { cause?: unknown },
  ) {
    super(code, message, code === 'refused' ? 409 : 503, { expose: true, ...options });
  }
}
