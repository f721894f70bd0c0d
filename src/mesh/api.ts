import { Type } from '@sinclair/typebox';
import { lazyCheck } from '../schema/lazy-check.js';
import { MeshError } from './errors.js';
import { MESH_METHOD } from './frames.js';
import type { MeshHandler } from './peer-requests.js';

const MeshMessageSchema = Type.Object(
  {
    method: Type.String({ pattern: MESH_METHOD }),
    server: Type.String({ minLength: 1, maxLength: 128 }),
    data: Type.Optional(Type.Unknown()),
    timeoutMs: Type.Optional(Type.Integer({ minimum: 1, maximum: 120_000 })),
  },
  { additionalProperties: false },
);
const messageCheck = lazyCheck(MeshMessageSchema);

/** `server.mesh.send`: a `mesh.<name>` handler on one peer's primary. */
export interface MeshMessage {
  method: string;
  server: string;
  data?: unknown;
  timeoutMs?: number;
}

export interface MeshReply {
  server: string;
  ok: boolean;
  result?: unknown;
  error?: { code: string; message: string };
}

export interface PeerInfo {
  server: string;
  direction: 'in' | 'out';
  publicUrl?: string;
  organizations: string[];
}

/** SPEC 6 as every process sees it (`server.mesh`); workers reach it through their primary. */
export interface MeshApi {
  send(message: MeshMessage): Promise<MeshReply>;
  handle(method: string, handler: MeshHandler): void;
  peers(): Promise<PeerInfo[]>;
}

/** Validates a `server.mesh.send` argument (it may come from a worker or an embedding app). */
export function checkMeshMessage(message: unknown): asserts message is MeshMessage {
  if (messageCheck.Check(message)) return;
  const error = messageCheck.Errors(message).First();
  throw new MeshError('bad_request', `mesh.send: ${error?.path.replace(/^\//, '') || 'message'}: ${error?.message ?? 'invalid'}`);
}
