import { Type, type Static } from '@sinclair/typebox';
import { lazyCheck } from '../schema/lazy-check.js';
import type { DeliveredEnvelope } from './envelope.js';
import type { RequestResult } from './handlers.js';

export const IPC_CHANNEL = 'ipc';

const ReplyErrorSchema = Type.Object({ code: Type.String(), message: Type.String() });

/** What a worker may send the primary on the ipc channel; checked, since a worker is another process. */
const WorkerIpcMessageSchema = Type.Union([
  Type.Object({
    kind: Type.Literal('send'),
    envelope: Type.Unknown(),
    requestId: Type.Optional(Type.Integer({ minimum: 1 })),
    timeoutMs: Type.Optional(Type.Integer({ minimum: 1, maximum: 120_000 })),
  }),
  Type.Object({
    kind: Type.Literal('result'),
    deliveryId: Type.Integer({ minimum: 1 }),
    ok: Type.Boolean(),
    result: Type.Optional(Type.Unknown()),
    error: Type.Optional(ReplyErrorSchema),
  }),
]);
export type WorkerIpcMessage = Static<typeof WorkerIpcMessageSchema>;

const workerMessageCheck = lazyCheck(WorkerIpcMessageSchema);
export const isWorkerIpcMessage = (payload: unknown): payload is WorkerIpcMessage => workerMessageCheck.Check(payload);

export type PrimaryIpcMessage =
  | { kind: 'deliver'; deliveryId: number; envelope: DeliveredEnvelope }
  | { kind: 'replies'; requestId: number; ok: true; result: RequestResult }
  | { kind: 'replies'; requestId: number; ok: false; error: { code: string; message: string; field?: string } };
