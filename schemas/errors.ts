import { Type, type TOptional, type TSchema } from '@sinclair/typebox';
import { AUTH_ERRORS } from '../src/auth/errors.js';
import type { ErrorAnswer, FleetplaneError } from '../src/errors.js';

/** An example answer's `error`: `{ code, message, ...details }`, as an error of a catalogue answers it. */
export type ErrorExample = ErrorAnswer;

/** What `error` answers, for an example built from a catalogue entry and then placed (at a step, an input). */
export const answerOf = (error: FleetplaneError): ErrorExample => error.toBody().error;

/**
 * An error reply in the one error shape, `{ error: { code, message } }`, with what this status means on its
 * route and examples of the codes that route really answers with it. The examples are shown in the docs.
 */
export function errorReply(description: string, ...examples: ErrorExample[]) {
  const optional: Record<string, TOptional<TSchema>> = {};
  for (const field of examples.flatMap((example) => Object.keys(example))) {
    if (field === 'code' || field === 'message') continue;
    if (!Object.hasOwn(ERROR_DETAILS, field)) throw new Error(`an example of "${description}" answers error.${field}, which the error shape does not describe`);
    optional[field] = Type.Optional(ERROR_DETAILS[field as keyof typeof ERROR_DETAILS]);
  }
  return Type.Object(
    { error: Type.Object({ code: Type.String({ description: 'Stable, machine-readable' }), message: Type.String({ description: 'For people; 5xx never carry internals' }), ...optional }) },
    { description, examples: examples.map((error) => ({ error })) },
  );
}

/** The fields some errors add to `code` and `message`; a reply declares those its examples show. */
const ERROR_DETAILS = {
  step: Type.String({ description: 'The workflow step that failed' }),
  upstreamStatus: Type.Integer({ description: "The HTTP status the provider's upstream answered with" }),
};

/**
 * Answers every envelope route can give, whatever it does with the envelope. Fastify's own refusals (JSON it
 * cannot parse, a body over the limit) keep its messages under the error handler's codes; the rest are
 * authorization's catalogue entries.
 */
export const ENVELOPE_ERRORS = {
  invalidJson: { code: 'bad_request', message: "Body is not valid JSON but content-type is set to 'application/json'" },
  poisonedJson: { code: 'bad_request', message: 'Object contains forbidden prototype property' },
  tooLarge: { code: 'payload_too_large', message: 'Request body is too large' },
  notAuthorized: AUTH_ERRORS.forbidden.example(),
  malformedAuthorization: AUTH_ERRORS.malformedAuthorization.example(),
  revoked: AUTH_ERRORS.keyRevoked.example(),
  expired: AUTH_ERRORS.keyExpired.example(),
  conflictingKeys: AUTH_ERRORS.conflictingKeys.example(),
} satisfies Record<string, ErrorExample>;

export const permissionDenied = (method: string): ErrorExample => AUTH_ERRORS.permissionDenied.example(method);
