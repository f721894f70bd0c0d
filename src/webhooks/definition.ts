import { Type, type Static, type TSchema } from '@sinclair/typebox';
import { lazyCheck, type SchemaCheck } from '../schema/lazy-check.js';
import { ResourceName } from '../api/provider.js';
import { schemaViolation } from '../api/schema-violation.js';

const HeaderName = Type.String({ pattern: "^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,128}$" });
const Secret = Type.String({ minLength: 1, maxLength: 4096, description: 'Never returned by reads, printed or logged' });
export const EventName = Type.String({ pattern: '^(\\*|[A-Za-z0-9_.:-]{1,128})$', description: 'An event name, or "*" for any other event' });

export const HmacVerification = Type.Object(
  {
    scheme: Type.Literal('hmac-sha256'),
    header: HeaderName,
    prefix: Type.Optional(Type.String({ maxLength: 64, description: 'Text before the hex digest, e.g. "sha256="' })),
    secret: Secret,
  },
  { additionalProperties: false, description: 'HMAC-SHA256 of the raw body, hex, in a header' },
);
export const TokenVerification = Type.Object(
  { scheme: Type.Literal('token'), header: HeaderName, secret: Secret },
  { additionalProperties: false, description: 'A static token the sender puts in a header' },
);
const VERIFICATIONS: Record<string, SchemaCheck<TSchema>> = { 'hmac-sha256': lazyCheck(HmacVerification), token: lazyCheck(TokenVerification) };

/** SPEC 12.1: a webhook as written in `webhooks` and resource files. */
export const WebhookDefinition = Type.Object(
  {
    name: ResourceName,
    description: Type.Optional(Type.String({ maxLength: 1024 })),
    verify: Type.Object({ scheme: Type.Union([Type.Literal('hmac-sha256'), Type.Literal('token')]) }, { additionalProperties: true }),
    event: Type.Optional(
      Type.Object(
        {
          header: Type.Optional(HeaderName),
          field: Type.Optional(Type.String({ pattern: '^[A-Za-z0-9_-]{1,64}(\\.[A-Za-z0-9_-]{1,64}){0,15}$', description: 'Dotted path into the JSON body' })),
        },
        { additionalProperties: false, description: 'Where the event name is: a header or a JSON field; without it every delivery is event "*"' },
      ),
    ),
    workflows: Type.Record(EventName, ResourceName, { minProperties: 1, maxProperties: 256, additionalProperties: false, description: 'Event name → workflow' }),
  },
  { additionalProperties: false },
);
export type HmacVerification = Static<typeof HmacVerification>;
export type TokenVerification = Static<typeof TokenVerification>;
export type WebhookDefinition = Omit<Static<typeof WebhookDefinition>, 'verify'> & { verify: HmacVerification | TokenVerification };

const definitionCheck = lazyCheck(WebhookDefinition);

/** Why a definition is refused, as `field: problem`; undefined when it is valid. */
export function webhookViolation(value: unknown, prefix = ''): string | undefined {
  const violation = schemaViolation(definitionCheck, value, prefix);
  if (violation) return violation;
  const definition = value as Static<typeof WebhookDefinition>;
  const where = (field: string) => [prefix, field].filter(Boolean).join('.');
  const verification = schemaViolation(VERIFICATIONS[definition.verify.scheme]!, definition.verify, where('verify'));
  if (verification) return verification;
  if (definition.event && (definition.event.header === undefined) === (definition.event.field === undefined)) {
    return `${where('event')}: needs exactly one of "header" or "field"`;
  }
  return undefined;
}
