import { Type, type Static } from '@sinclair/typebox';
import { TypeCompiler } from '@sinclair/typebox/compiler';
import { schemaViolation } from '../api/schema-violation.js';
import { CRUD_ERRORS } from './errors.js';

export const CRUD_METHODS = ['object.create', 'object.read', 'object.update', 'object.delete'] as const;
export type CrudMethod = (typeof CRUD_METHODS)[number];
export const MAX_DOCUMENTS_PER_CREATE = 100;
export const MAX_READ_LIMIT = 1000;
export const DEFAULT_READ_LIMIT = 100;

const Open = Type.Object({}, { additionalProperties: true });

/** SPEC 7.3: the CRUD envelope as callers write it (HTTP body or WebSocket frame). */
export const CrudEnvelope = Type.Object(
  {
    method: Type.Union(CRUD_METHODS.map((method) => Type.Literal(method)), { description: 'Authorized per method, with a "collection" restriction' }),
    collection: Type.String({ pattern: '^[A-Za-z][A-Za-z0-9_-]{0,63}$', description: 'Collection of the caller’s organization', examples: ['apis'] }),
    documents: Type.Optional(Type.Array(Open, { minItems: 1, maxItems: MAX_DOCUMENTS_PER_CREATE, description: 'object.create: documents to insert' })),
    filter: Type.Optional(Type.Object({}, { additionalProperties: true, description: 'read, update, delete: MongoDB-style filter ($eq $ne $in $nin $exists $gt $gte $lt $lte $and $or)' })),
    sort: Type.Optional(Type.Record(Type.String({ minLength: 1, maxLength: 256 }), Type.Union([Type.Literal(1), Type.Literal(-1)]), { description: 'object.read' })),
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: MAX_READ_LIMIT, description: `object.read (default ${DEFAULT_READ_LIMIT})` })),
    update: Type.Optional(Type.Object({}, { additionalProperties: true, description: 'object.update: $set $unset $inc $push $pull $addToSet' })),
    apikey: Type.Optional(Type.String({ description: 'Key, when not sent as Authorization: Bearer' })),
  },
  {
    additionalProperties: false,
    $id: 'CrudEnvelope',
    examples: [
      { method: 'object.read', collection: 'workflows', filter: { name: 'make-item' }, limit: 10 },
      { method: 'object.update', collection: 'apis', filter: { name: 'items' }, update: { $set: { timeoutMs: 3000 } } },
    ],
  },
);
export type CrudEnvelope = Static<typeof CrudEnvelope>;
const envelopeCheck = TypeCompiler.Compile(CrudEnvelope);

/** Fields each method takes; any other is a mistake the caller should hear about, not have ignored. */
const FIELDS: Record<CrudMethod, { required: readonly string[]; allowed: readonly string[] }> = {
  'object.create': { required: ['documents'], allowed: ['documents'] },
  'object.read': { required: [], allowed: ['filter', 'sort', 'limit'] },
  'object.update': { required: ['filter', 'update'], allowed: ['filter', 'update'] },
  'object.delete': { required: ['filter'], allowed: ['filter'] },
};
const COMMON = new Set(['method', 'collection', 'apikey']);
/** Fields authorization adds to the envelope it hands on. */
const RESOLVED = new Set(['organization_id', 'host', 'user', 'socket']);

export function isCrudMethod(method: unknown): method is CrudMethod {
  return typeof method === 'string' && (CRUD_METHODS as readonly string[]).includes(method);
}

/**
 * Validates an envelope (authorized or not): 400 naming the first wrong field. `schemaChecked` says the caller's
 * own fields already passed `CrudEnvelope` (the HTTP route's body schema, compiled without coercion or removal of
 * fields), so only the per-method rules remain.
 */
export function parseCrudEnvelope(envelope: Readonly<Record<string, unknown>>, options: { schemaChecked?: boolean } = {}): CrudEnvelope {
  let valid: CrudEnvelope;
  if (options.schemaChecked) valid = envelope as CrudEnvelope;
  else {
    const own = Object.fromEntries(Object.entries(envelope).filter(([key]) => !RESOLVED.has(key)));
    const violation = schemaViolation(envelopeCheck, own);
    if (violation) throw CRUD_ERRORS.invalidEnvelope(violation);
    valid = own as CrudEnvelope;
  }
  const fields = FIELDS[valid.method];
  for (const field of fields.required) if (valid[field as keyof CrudEnvelope] === undefined) throw CRUD_ERRORS.invalidEnvelope(`${field}: is required by ${valid.method}`);
  for (const field of Object.keys(valid)) {
    if (!COMMON.has(field) && !RESOLVED.has(field) && !fields.allowed.includes(field)) throw CRUD_ERRORS.invalidEnvelope(`${field}: not used by ${valid.method}`);
  }
  return valid;
}
