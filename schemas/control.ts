import { Type, type Static } from '@sinclair/typebox';
import { IpcEnvelopeSchema } from '../src/ipc/envelope.js';
import { MissingTargetSchema, TargetReplySchema, UnknownWorkerSchema } from '../src/ipc/handlers.js';

/** `POST /control` body: an IPC envelope, plus the key when it is not sent as a Bearer token. */
export const ControlRequest = Type.Object(
  {
    ...IpcEnvelopeSchema.properties,
    apikey: Type.Optional(Type.String({ description: 'Key, when not sent as Authorization: Bearer' })),
  },
  {
    additionalProperties: false,
    $id: 'ControlRequest',
    examples: [
      { method: 'cordon', server: 'srv-b', worker: 2, value: true },
      { method: 'shed', server: 'srv-b', master: true, organizations: ['org_abc123'] },
      { method: 'status', broadcast: true, master: true },
      { method: 'cordon', worker: 2, data: true },
    ],
  },
);
export type ControlRequest = Static<typeof ControlRequest>;

/** The shape every process checks a gathered reply against (src/ipc/handlers.ts), described for the docs. */
export const TargetReply = Type.Object({ ...TargetReplySchema.properties, worker: Type.Integer({ minimum: 0, description: '0 = the primary' }) }, { $id: 'TargetReply' });

export const ControlReply = Type.Object(
  {
    id: Type.String({ description: 'Message id, also the trace id' }),
    replies: Type.Array(TargetReply),
    missing: Type.Array(MissingTargetSchema, { description: 'Targets that did not answer in time' }),
    unknownWorkers: Type.Optional(
      Type.Array(UnknownWorkerSchema, { description: 'Of the missing targets, the workers named by number that their server does not have, each with why: "no such worker: 9 (this server has workers 1, 2)"' }),
    ),
  },
  {
    $id: 'ControlReply',
    description: 'One reply per target that answered in time (each with its own `ok`), and the targets that did not',
    examples: [
      { id: '0b7e2c1e-6a4f-4a55-9c43-2f1b4d0e9a10', replies: [{ server: 'srv-a', worker: 1, ok: true, result: { status: 'ready' } }], missing: [] },
      // A cordon of every worker of srv-b: /readyz answers 503 for the readiness grace, then the workers are cordoned.
      { id: '5d0c3f6e-2b1a-4c8e-9f7d-3a6b2e1c0d94', replies: [{ server: 'srv-b', worker: 0, ok: true, result: { accepted: true, effectiveInMs: 5000 } }], missing: [] },
      // restart with master: true: a new primary is started, and takes the listening sockets once its workers are ready.
      { id: 'a4e1b7c2-9d3f-4e6a-8b5c-1f2d3e4a5b6c', replies: [{ server: 'srv-a', worker: 0, ok: true, result: { accepted: true, restarting: 'primary', handover: { from: { pid: 4121 }, to: { pid: 5310 } } } }], missing: [] },
    ],
  },
);
export type ControlReply = Static<typeof ControlReply>;
