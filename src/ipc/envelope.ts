import { Type, type Static } from '@sinclair/typebox';
import { Value } from '@sinclair/typebox/value';
import { lazyCheck } from '../schema/lazy-check.js';
import { FleetplaneError } from '../errors.js';

export const MAX_TARGETS = 256;
export const DEFAULT_MAX_ENVELOPE_BYTES = 1024 * 1024;

const Id = Type.String({ minLength: 1, maxLength: 128, pattern: '^[A-Za-z0-9._:-]+$' });
const OneOrMany = <T extends ReturnType<typeof Type.String> | ReturnType<typeof Type.Integer>>(item: T) =>
  Type.Union([item, Type.Array(item, { minItems: 1, maxItems: MAX_TARGETS })]);

/** SPEC 5.2: an envelope as callers write it. Targets select processes; `data` is the method's argument. */
export const IpcEnvelopeSchema = Type.Object(
  {
    method: Type.String({ minLength: 1, maxLength: 128, pattern: '^[A-Za-z][A-Za-z0-9_.:-]*$', description: 'Handler to run in each target', examples: ['status'] }),
    data: Type.Optional(Type.Unknown({ description: "The method's argument" })),
    server: Type.Optional(OneOrMany(Id)),
    cluster: Type.Optional(OneOrMany(Id)),
    worker: Type.Optional(OneOrMany(Type.Integer({ minimum: 0, maximum: 256 }))),
    master: Type.Optional(Type.Boolean({ description: 'The primary process of each selected server' })),
    broadcast: Type.Optional(Type.Boolean({ description: 'Every worker of each selected server (every server when none is named)' })),
    organization_id: Type.Optional(Type.String({ minLength: 1, maxLength: 128 })),
    confirm: Type.Optional(Type.String({ maxLength: 128, description: 'The target server id, required by reboot and shutdown' })),
    timeoutMs: Type.Optional(Type.Integer({ minimum: 1, maximum: 120_000, description: 'How long request() waits for replies' })),
  },
  { additionalProperties: false, $id: 'IpcEnvelope' },
);
export type IpcEnvelope = Static<typeof IpcEnvelopeSchema>;

/** Set by the sending process, never by the caller. */
export interface EnvelopeMeta {
  /** UUID, also the trace id of everything the envelope causes. */
  id: string;
  origin: { server: string; worker: number };
  hops: number;
}

export interface DeliveredEnvelope extends IpcEnvelope {
  meta: EnvelopeMeta;
}

export type IpcErrorCode = 'invalid_envelope' | 'no_target' | 'too_large' | 'unknown_method' | 'handler_failed' | 'forbidden' | 'unavailable' | 'bad_request';

/** The HTTP status each IPC error answers with on the control surface. */
const IPC_STATUS = { invalid_envelope: 400, no_target: 400, bad_request: 400, too_large: 413, unknown_method: 404, forbidden: 403, unavailable: 503, handler_failed: 500 } as const;

export class IpcError extends FleetplaneError {
  override readonly name = 'IpcError';
  declare readonly code: IpcErrorCode;
  declare readonly statusCode: (typeof IPC_STATUS)[IpcErrorCode];
  constructor(
    code: IpcErrorCode,
    message: string,
    readonly field?: string,
  ) {
    super(code, message, IPC_STATUS[code]);
  }
}

const UNION_HINTS = {
  server: `a server id or a list of 1 to ${MAX_TARGETS} ids`,
  cluster: `a cluster id or a list of 1 to ${MAX_TARGETS} ids`,
  worker: `a worker number (0 to 256) or a list of 1 to ${MAX_TARGETS} of them`,
};

// Compiled once, on the first envelope: every envelope of every process passes here, so the valid path must be cheap.
const envelopeCheck = lazyCheck(IpcEnvelopeSchema);

/** Validates an envelope from outside (HTTP, WebSocket, CLI, another process) and bounds its size. */
export function parseEnvelope(input: unknown, maxBytes = DEFAULT_MAX_ENVELOPE_BYTES): IpcEnvelope {
  const size = Buffer.byteLength(JSON.stringify(input ?? null) ?? '');
  if (size > maxBytes) throw new IpcError('too_large', `envelope is ${size} bytes; the limit is ${maxBytes}`);
  if (envelopeCheck.Check(input)) return input;
  const error = Value.Errors(IpcEnvelopeSchema, input).First();
  if (error) {
    const field = error.path.replace(/^\//, '').replaceAll('/', '.') || 'envelope';
    const top = field.split('.')[0] as keyof typeof UNION_HINTS;
    let detail = error.message;
    if (detail === 'Unexpected property') detail = 'unknown field';
    else if (detail === 'Expected union value' && UNION_HINTS[top]) detail = `expected ${UNION_HINTS[top]}`;
    throw new IpcError('invalid_envelope', `${field}: ${detail}`, field);
  }
  return input as IpcEnvelope;
}

export const asList = <T>(value: T | T[] | undefined): T[] | undefined => (value === undefined ? undefined : Array.isArray(value) ? value : [value]);
