import { Type, type Static, type TSchema } from '@sinclair/typebox';
import { Value } from '@sinclair/typebox/value';
import { STORAGE_ERROR_CODES } from './errors.js';
import type { JsonValue } from './json-value.js';

export const STORAGE_CHANNEL = 'storage';

const RequestId = Type.Integer({ minimum: 1 });
const Revision = Type.Integer({ minimum: 0 });
// Key and value rules are checked by `checkKey` / `toStoredValue`, which give the precise error to send back.
const AnyKey = Type.String();
const AnyValue = Type.Unknown();

/**
 * What a worker may send the primary; checked, since a worker is another process (buggy or compromised).
 * `sync` asks for a fresh snapshot after a revision gap (the first one comes unasked).
 */
const WorkerRequestSchema = Type.Union([
  Type.Object({ op: Type.Literal('sync'), id: RequestId }),
  Type.Object({ op: Type.Literal('set'), id: RequestId, key: AnyKey, value: AnyValue }),
  Type.Object({ op: Type.Literal('delete'), id: RequestId, key: AnyKey }),
  Type.Object({ op: Type.Literal('clear'), id: RequestId }),
]);
export type WorkerRequest = Static<typeof WorkerRequestSchema>;

const MutationSchema = Type.Union([
  Type.Object({ kind: Type.Literal('set'), revision: Revision, key: AnyKey, value: AnyValue }),
  Type.Object({ kind: Type.Literal('delete'), revision: Revision, key: AnyKey }),
  Type.Object({ kind: Type.Literal('clear'), revision: Revision }),
]);

/** One applied change, numbered by the primary; every process applies them in revision order. */
export type StorageMutation =
  | { kind: 'set'; revision: number; key: string; value: JsonValue }
  | { kind: 'delete'; revision: number; key: string }
  | { kind: 'clear'; revision: number };

const ErrorCodeSchema = Type.Union(STORAGE_ERROR_CODES.map((code) => Type.Literal(code)));

const PrimaryMessageSchema = Type.Union([
  Type.Object({ type: Type.Literal('mutation'), mutation: MutationSchema, replyTo: Type.Optional(RequestId) }),
  Type.Object({ type: Type.Literal('snapshot'), id: Type.Optional(RequestId), revision: Revision, entries: Type.Array(Type.Tuple([AnyKey, AnyValue])) }),
  Type.Object({ type: Type.Literal('reply'), id: RequestId, ok: Type.Literal(true), revision: Revision, result: Type.Union([Type.Integer(), Type.Boolean()]) }),
  Type.Object({ type: Type.Literal('reply'), id: RequestId, ok: Type.Literal(false), error: Type.Object({ code: ErrorCodeSchema, message: Type.String() }) }),
]);

/** The value types are narrowed by hand: the schemas above leave values as `unknown`. */
export type PrimaryMessage =
  /** `replyTo`: the writer's copy also answers its request (result: the revision for a set, else true). */
  | { type: 'mutation'; mutation: StorageMutation; replyTo?: number }
  /** Without `id`: the snapshot the primary pushes to a worker as soon as it listens. */
  | { type: 'snapshot'; id?: number; revision: number; entries: Array<[string, JsonValue]> }
  | { type: 'reply'; id: number; ok: true; revision: number; result: number | boolean }
  | { type: 'reply'; id: number; ok: false; error: { code: (typeof STORAGE_ERROR_CODES)[number]; message: string } };

const check =
  <T>(schema: TSchema) =>
  (payload: unknown): payload is T =>
    Value.Check(schema, payload);

export const isWorkerRequest = check<WorkerRequest>(WorkerRequestSchema);
export const isPrimaryMessage = check<PrimaryMessage>(PrimaryMessageSchema);

/** The request id of a message that failed validation, when it has a usable one to answer. */
export function requestIdOf(payload: unknown): number | undefined {
  const id = typeof payload === 'object' && payload !== null ? (payload as { id?: unknown }).id : undefined;
  return Value.Check(RequestId, id) ? (id as number) : undefined;
}
