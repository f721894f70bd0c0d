import { Type, type Static } from '@sinclair/typebox';
import { Value } from '@sinclair/typebox/value';
import { lazyCheck } from '../schema/lazy-check.js';
import { FleetplaneError, SHARED_CODES, errorCode, type ErrorCode } from '../errors.js';

export const MAX_TARGETS = 256;
export const DEFAULT_MAX_ENVELOPE_BYTES = 1024 * 1024;

const Id = Type.String({ minLength: 1, maxLength: 128, pattern: '^[A-Za-z0-9._:-]+$' });
const OneOrMany = <T extends ReturnType<typeof Type.String> | ReturnType<typeof Type.Integer>>(item: T) =>
  Type.Union([item, Type.Array(item, { minItems: 1, maxItems: MAX_TARGETS })]);

const OrganizationId = Type.String({ minLength: 1, maxLength: 128 });

/**
 * SPEC 5.2: an envelope as callers write it. Targets select processes; `data` is the method's argument, which
 * `cordon` / `drain` also take as `value` and `shed` as `organizations` (the design documents' spelling).
 */
export const IpcEnvelopeSchema = Type.Object(
  {
    method: Type.String({ minLength: 1, maxLength: 128, pattern: '^[A-Za-z][A-Za-z0-9_.:-]*$', description: 'Handler to run in each target', examples: ['status'] }),
    data: Type.Optional(Type.Unknown({ description: "The method's argument" })),
    value: Type.Optional(Type.Boolean({ description: 'cordon / drain: the same as data (true or false); when both are given they must agree' })),
    organizations: Type.Optional(
      Type.Union([Type.Array(OrganizationId, { maxItems: 10_000 }), Type.Literal(false)], {
        description: 'shed: the same as data (organization ids, or false to end shedding); when both are given they must agree',
      }),
    ),
    server: Type.Optional(OneOrMany(Id)),
    cluster: Type.Optional(OneOrMany(Id)),
    worker: Type.Optional(OneOrMany(Type.Integer({ minimum: 0, maximum: 256 }))),
    master: Type.Optional(Type.Boolean({ description: 'The primary process of each selected server' })),
    broadcast: Type.Optional(Type.Boolean({ description: 'Every worker of each selected server (every server when none is named)' })),
    organization_id: Type.Optional(OrganizationId),
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

export type IpcErrorCode = 'invalid_envelope' | 'no_target' | 'invalid_target' | 'too_large' | 'unknown_method' | 'handler_failed' | 'forbidden' | 'unavailable' | 'bad_request';

/**
 * Each IPC error code declared once with the HTTP status it answers on the control surface (the codes several
 * surfaces answer are the shared ones); the class is the message template, as envelopes name their field.
 */
export const IPC_CODES = {
  invalid_envelope: SHARED_CODES.invalidEnvelope,
  no_target: errorCode('no_target', 400),
  invalid_target: errorCode('invalid_target', 400),
  bad_request: errorCode('bad_request', 400),
  too_large: errorCode('too_large', 413),
  unknown_method: SHARED_CODES.unknownMethod,
  forbidden: SHARED_CODES.forbidden,
  unavailable: SHARED_CODES.unavailable,
  handler_failed: errorCode('handler_failed', 500),
} as const satisfies Record<IpcErrorCode, ErrorCode>;

/** True for the codes an `IpcError` can carry (e.g. one that crossed a process boundary as text). */
export const isIpcErrorCode = (code: unknown): code is IpcErrorCode => typeof code === 'string' && Object.hasOwn(IPC_CODES, code);

export class IpcError extends FleetplaneError {
  override readonly name = 'IpcError';
  declare readonly code: IpcErrorCode;
  constructor(
    code: IpcErrorCode,
    message: string,
    readonly field?: string,
  ) {
    super(code, message, IPC_CODES[code].statusCode);
  }
}

const UNION_HINTS = {
  server: `a server id or a list of 1 to ${MAX_TARGETS} ids`,
  cluster: `a cluster id or a list of 1 to ${MAX_TARGETS} ids`,
  worker: `a worker number (0 to 256) or a list of 1 to ${MAX_TARGETS} of them`,
};

// Compiled once, on the first envelope: every envelope of every process passes here, so the valid path must be cheap.
const envelopeCheck = lazyCheck(IpcEnvelopeSchema);

/**
 * Validates an envelope from outside (HTTP, WebSocket, CLI, another process) and bounds its size. The answer
 * carries `data` and its alias alike (see `withDataAlias`).
 */
export function parseEnvelope(input: unknown, maxBytes = DEFAULT_MAX_ENVELOPE_BYTES): IpcEnvelope {
  const size = Buffer.byteLength(JSON.stringify(input ?? null) ?? '');
  if (size > maxBytes) throw new IpcError('too_large', `envelope is ${size} bytes; the limit is ${maxBytes}`);
  if (envelopeCheck.Check(input)) return withDataAlias(input);
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

/** SPEC 5.4: the field each built-in method also takes its argument as, in the design documents' envelopes. */
export const DATA_ALIASES: Readonly<Record<string, 'value' | 'organizations'>> = { cordon: 'value', drain: 'value', shed: 'organizations' };

const isRecord = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value);

/** A `cordon` / `drain` argument: nothing (true), true, false or `{ value }`; undefined when it is none of them. */
export function flagOf(data: unknown): boolean | undefined {
  if (data === undefined || data === null) return true;
  if (typeof data === 'boolean') return data;
  if (isRecord(data) && (data.value === undefined || typeof data.value === 'boolean')) return data.value ?? true;
  return undefined;
}

/** A `shed` argument: a list of ids, false, or `{ organizations }`; undefined when it is none of them. */
export function shedListOf(data: unknown): string[] | false | undefined {
  const given = isRecord(data) ? data.organizations : data;
  if (given === false) return false;
  return Array.isArray(given) && given.every((id) => typeof id === 'string') ? (given as string[]) : undefined;
}

const sameShed = (a: string[] | false, b: string[] | false): boolean => {
  const left = new Set(a || []);
  const right = new Set(b || []);
  return left.size === right.size && [...left].every((id) => right.has(id));
};

/**
 * `value` (cordon, drain) and `organizations` (shed) are `data` as the design documents write it. The answer
 * holds both, equal: `data` from the alias when only the alias was given, the alias from `data` when `data` is
 * one of the method's forms, so a key's restriction on either field holds whichever one the caller wrote. Both
 * given and different is refused, naming the two fields; an alias on another method is refused too. Types
 * are the schema's to check: a value of the wrong type is left for it.
 */
export function withDataAlias<T extends { method?: unknown; data?: unknown; value?: unknown; organizations?: unknown }>(envelope: T): T {
  const alias = typeof envelope.method === 'string' && Object.hasOwn(DATA_ALIASES, envelope.method) ? DATA_ALIASES[envelope.method] : undefined;
  for (const field of ['value', 'organizations'] as const) {
    if (envelope[field] !== undefined && field !== alias) {
      const takers = Object.keys(DATA_ALIASES).filter((method) => DATA_ALIASES[method] === field);
      throw new IpcError('invalid_envelope', `${field}: only ${takers.join(' and ')} ${takers.length === 1 ? 'takes' : 'take'} ${field} (the same as data); send data`, field);
    }
  }
  if (!alias) return envelope;
  const given = envelope[alias];
  const fromData = alias === 'value' ? flagOf(envelope.data) : envelope.data === undefined ? undefined : shedListOf(envelope.data);
  if (given === undefined) return fromData === undefined ? envelope : { ...envelope, [alias]: fromData };
  const wellTyped = alias === 'value' ? typeof given === 'boolean' : given === false || (Array.isArray(given) && given.every((id) => typeof id === 'string'));
  if (!wellTyped) return envelope;
  if (envelope.data === undefined) return { ...envelope, data: given };
  const agree = alias === 'value' ? fromData === given : fromData !== undefined && sameShed(fromData as string[] | false, given as string[] | false);
  if (!agree) {
    throw new IpcError(
      'bad_request',
      `${alias} and data disagree (${alias}: ${JSON.stringify(given)}, data: ${JSON.stringify(envelope.data)?.slice(0, 200)}): ${alias} is the same as data for ${String(envelope.method)}; send one of them, or the same in both`,
      alias,
    );
  }
  return envelope;
}
