// The shape of permission maps: a leaf module (typebox only) below both the store's document schemas and
// authorization, so the data layer validates key and organization documents without depending on auth.
import { Type, type Static } from '@sinclair/typebox';

/** Envelope methods are dotted names (`workflow.deploy`, `object.read`, `post`); `*` is the catch-all entry. */
const METHOD = '[A-Za-z0-9_-]{1,64}(\\.[A-Za-z0-9_-]{1,64}){0,7}';
export const METHOD_PATTERN = `^${METHOD}$`;

const AllowedScalar = Type.Union([Type.String({ maxLength: 1024 }), Type.Number(), Type.Boolean(), Type.Null()]);
/** Allowed values of one field: a single value or a list of them. */
export const AllowedValues = Type.Union([AllowedScalar, Type.Array(AllowedScalar, { maxItems: 1024 })]);

/** Constraints on `data` fields, by dotted path (`instance.size`). */
export const DataConstraints = Type.Record(Type.String({ minLength: 1, maxLength: 256 }), AllowedValues);

/**
 * A restriction grants the method only when every listed envelope field (`api`, `endpoint`, `server`, `worker`,
 * `collection`, ...) holds allowed values, and every listed `data` field too.
 */
export const Restriction = Type.Object({ data: Type.Optional(DataConstraints) }, { additionalProperties: AllowedValues });

export const PermissionValue = Type.Union([Type.Boolean(), Restriction]);

export const Permissions = Type.Record(Type.String({ pattern: `^(\\*|${METHOD})$` }), PermissionValue, {
  additionalProperties: false,
  description: 'Envelope method → true, false or a restriction; exact method first, then dotted prefixes, then "*"',
  examples: [{ 'metrics.read': true, workflow: { name: ['deploy'] }, post: { api: ['items'], endpoint: ['create'] } }],
});

export type AllowedValues = Static<typeof AllowedValues>;
export type DataConstraints = Static<typeof DataConstraints>;
/** Written out: `Static` cannot express "`data` or any other field". */
export type Restriction = { [field: string]: AllowedValues | DataConstraints | undefined; data?: DataConstraints };
export type PermissionValue = boolean | Restriction;
export type Permissions = Record<string, PermissionValue>;
