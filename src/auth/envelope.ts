import { Type, type Static } from '@sinclair/typebox';
import { TypeCompiler } from '@sinclair/typebox/compiler';
import { METHOD_PATTERN } from '../schema/permissions.js';

/**
 * What every envelope must carry before it is authorized; the rest depends on the method and is checked by the
 * handler. `apikey` is the in-body alternative to `Authorization: Bearer`.
 */
export const Envelope = Type.Object(
  {
    method: Type.String({ pattern: METHOD_PATTERN, description: 'Dotted method name, e.g. object.read, workflow.deploy, post' }),
    // Any type here: a malformed key is refused by authorization (403), not as a malformed envelope (400).
    apikey: Type.Optional(Type.Unknown({ description: 'Key, when not sent as a Bearer token' })),
  },
  { additionalProperties: true, $id: 'Envelope' },
);
export type Envelope = Static<typeof Envelope> & Record<string, unknown>;
export const envelopeCheck = TypeCompiler.Compile(Envelope);

/** Who the request was authorized as; `null` in `user` for a request without a key. */
export interface AuthorizedUser {
  readonly key_id: string;
  readonly name: string;
  readonly admin: boolean;
  /** The key belongs to the platform organization, the one that owns the server (SPEC 8.4). */
  readonly platform: boolean;
}

export interface SocketIdentity {
  readonly remoteAddress: string | null;
  readonly remotePort: number | null;
  readonly encrypted: boolean;
}

/** The envelope a handler receives: deeply frozen, so scope and targets stay what was authorized. */
export type AuthorizedEnvelope = Readonly<Record<string, unknown>> & {
  readonly method: string;
  readonly organization_id: string;
  readonly host: string;
  readonly user: AuthorizedUser | null;
  readonly socket: SocketIdentity | null;
};

/** Fields the caller may not supply: replaced by what authorization resolved (or removed, for the key). */
const RESOLVED_FIELDS = new Set(['apikey', 'organization_id', 'host', 'user', 'socket']);
/** Deeper envelopes are refused: they serve no envelope method and would only cost stack and time. */
export const MAX_ENVELOPE_DEPTH = 64;

export class EnvelopeTooDeepError extends Error {}

function assign(target: Record<string, unknown>, key: string, value: unknown): void {
  // A JSON "__proto__" key must stay a plain field; assignment would replace the prototype instead.
  if (key === '__proto__') Object.defineProperty(target, key, { value, enumerable: true, writable: true, configurable: true });
  else target[key] = value;
}

function frozenCopy(value: unknown, depth: number): unknown {
  if (value === null || typeof value !== 'object') return value;
  if (depth > MAX_ENVELOPE_DEPTH) throw new EnvelopeTooDeepError();
  if (Array.isArray(value)) return Object.freeze(value.map((item) => frozenCopy(item, depth + 1)));
  const copy: Record<string, unknown> = {};
  for (const key of Object.keys(value)) assign(copy, key, frozenCopy((value as Record<string, unknown>)[key], depth + 1));
  return Object.freeze(copy);
}

/** A deeply frozen copy of `envelope` with the transport key removed and the resolved scope put in place. */
export function sanitizeEnvelope(
  envelope: Envelope,
  resolved: { organization_id: string; host: string; user: AuthorizedUser | null; socket: SocketIdentity | null },
): AuthorizedEnvelope {
  const copy: Record<string, unknown> = {};
  for (const key of Object.keys(envelope)) if (!RESOLVED_FIELDS.has(key)) assign(copy, key, frozenCopy(envelope[key], 1));
  copy.organization_id = resolved.organization_id;
  copy.host = resolved.host;
  copy.user = resolved.user && (Object.isFrozen(resolved.user) ? resolved.user : Object.freeze({ ...resolved.user }));
  copy.socket = resolved.socket && (Object.isFrozen(resolved.socket) ? resolved.socket : Object.freeze({ ...resolved.socket }));
  return Object.freeze(copy) as AuthorizedEnvelope;
}
