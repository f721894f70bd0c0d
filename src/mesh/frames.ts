import { Type, type Static, type TSchema } from '@sinclair/typebox';
import { lazyCheck, type SchemaCheck } from '../schema/lazy-check.js';

/** An envelope crosses one link at most once (the receiver never forwards), so more hops mean a bug or abuse. */
export const MAX_HOPS = 8;

const Id = Type.String({ minLength: 1, maxLength: 128, pattern: '^[A-Za-z0-9._:-]+$' });
const OrganizationId = Type.String({ minLength: 1, maxLength: 128 });
const CallId = Type.Integer({ minimum: 1 });
const ReplyError = Type.Object({ code: Type.String({ maxLength: 64 }), message: Type.String({ maxLength: 4096 }) });
export const MESH_METHOD = '^mesh\\.[A-Za-z0-9_.:-]{1,120}$';

const Meta = Type.Object(
  {
    id: Type.String({ pattern: '^[0-9a-fA-F-]{36}$' }),
    origin: Type.Object({ server: Id, worker: Type.Integer({ minimum: 0, maximum: 256 }) }, { additionalProperties: false }),
    hops: Type.Integer({ minimum: 1, maximum: MAX_HOPS }),
  },
  { additionalProperties: false },
);

const TargetReply = Type.Object({
  server: Id,
  worker: Type.Integer({ minimum: 0, maximum: 256 }),
  ok: Type.Boolean(),
  result: Type.Optional(Type.Unknown()),
  error: Type.Optional(ReplyError),
});
const Missing = Type.Object({ server: Id, worker: Type.Optional(Type.Integer({ minimum: 0, maximum: 256 })) });

const FRAMES = {
  // Sent first on every link: where load balancers may send traffic instead, and the organizations served.
  hello: Type.Object({ type: Type.Literal('hello'), publicUrl: Type.Optional(Type.String({ maxLength: 2048, pattern: '^https?://' })), organizations: Type.Array(OrganizationId, { maxItems: 100_000 }) }, { additionalProperties: false }),
  'org.active': Type.Object({ type: Type.Literal('org.active'), organization_id: OrganizationId }, { additionalProperties: false }),
  'mesh.orgDeleted': Type.Object({ type: Type.Literal('mesh.orgDeleted'), organization_id: OrganizationId }, { additionalProperties: false }),
  // An envelope for the receiver's router; `id` asks for the replies of its targets.
  envelope: Type.Object({ type: Type.Literal('envelope'), id: Type.Optional(CallId), envelope: Type.Unknown(), meta: Meta, timeoutMs: Type.Integer({ minimum: 1, maximum: 120_000 }) }, { additionalProperties: false }),
  replies: Type.Object({ type: Type.Literal('replies'), id: CallId, replies: Type.Array(TargetReply, { maxItems: 4096 }), missing: Type.Array(Missing, { maxItems: 4096 }), error: Type.Optional(ReplyError) }, { additionalProperties: false }),
  // `server.mesh.send`: a call of a handler on the receiver's primary.
  call: Type.Object({ type: Type.Literal('call'), id: CallId, method: Type.String({ pattern: MESH_METHOD }), data: Type.Optional(Type.Unknown()) }, { additionalProperties: false }),
  result: Type.Object({ type: Type.Literal('result'), id: CallId, ok: Type.Boolean(), result: Type.Optional(Type.Unknown()), error: Type.Optional(ReplyError) }, { additionalProperties: false }),
  // A frame of ours the peer refused.
  error: Type.Object({ type: Type.Literal('error'), id: Type.Optional(CallId), code: Type.String({ maxLength: 64 }), message: Type.String({ maxLength: 4096 }) }, { additionalProperties: false }),
};

/** Every frame a peer may send, checked at the boundary before anything acts on it. */
export const PeerFrameSchema = Type.Union(Object.values(FRAMES));
export type PeerFrame = { [K in keyof typeof FRAMES]: Static<(typeof FRAMES)[K]> }[keyof typeof FRAMES];
export type FrameOf<T extends PeerFrame['type']> = Extract<PeerFrame, { type: T }>;

// One compiled check per type, so a refusal names the field that is wrong instead of "no union member".
const checks = new Map<string, SchemaCheck<TSchema>>(Object.entries(FRAMES).map(([type, schema]) => [type, lazyCheck(schema)]));

export type FrameParse = { ok: true; frame: PeerFrame } | { ok: false; code: 'binary_frame' | 'too_large' | 'bad_json' | 'invalid_frame'; message: string; id?: number };

/** Decodes one WebSocket message from a peer: text, within `maxBytes`, JSON, and one of the frames above. */
export function parseFrame(data: Buffer | ArrayBuffer | Buffer[], isBinary: boolean, maxBytes: number): FrameParse {
  if (isBinary) return { ok: false, code: 'binary_frame', message: 'the mesh speaks JSON text frames' };
  const buffer = Array.isArray(data) ? Buffer.concat(data) : Buffer.isBuffer(data) ? data : Buffer.from(data);
  if (buffer.length > maxBytes) return { ok: false, code: 'too_large', message: `frame is ${buffer.length} bytes; the limit is ${maxBytes}` };
  let value: unknown;
  try {
    value = JSON.parse(buffer.toString('utf8'));
  } catch {
    return { ok: false, code: 'bad_json', message: 'frame is not JSON' };
  }
  const type = typeof value === 'object' && value !== null ? (value as { type?: unknown }).type : undefined;
  const check = typeof type === 'string' ? checks.get(type) : undefined;
  if (check?.Check(value)) return { ok: true, frame: value as PeerFrame };
  const raw = (value as { id?: unknown } | null)?.id;
  const id = typeof raw === 'number' && Number.isSafeInteger(raw) && raw > 0 ? raw : undefined;
  if (!check) return { ok: false, code: 'invalid_frame', message: `unknown frame type ${JSON.stringify(type ?? null).slice(0, 80)}`, id };
  const error = check.Errors(value).First();
  const field = error?.path.replace(/^\//, '').replaceAll('/', '.') || 'frame';
  return { ok: false, code: 'invalid_frame', message: `invalid ${type} frame: ${field}: ${error?.message ?? 'does not match'}`, id };
}
