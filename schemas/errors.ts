import { Type } from '@sinclair/typebox';

export interface ErrorExample {
  code: string;
  message: string;
}

/**
 * An error reply in the one error shape, `{ error: { code, message } }`, with what this status means on its
 * route and examples of the codes that route really answers with it. The examples are shown in the docs.
 */
export function errorReply(description: string, ...examples: ErrorExample[]) {
  return Type.Object(
    { error: Type.Object({ code: Type.String({ description: 'Stable, machine-readable' }), message: Type.String({ description: 'For people; 5xx never carry internals' }) }) },
    { description, examples: examples.map((error) => ({ error })) },
  );
}

/** Answers every envelope route can give, whatever it does with the envelope. */
export const ENVELOPE_ERRORS = {
  invalidJson: { code: 'bad_request', message: "Body is not valid JSON but content-type is set to 'application/json'" },
  poisonedJson: { code: 'bad_request', message: 'Object contains forbidden prototype property' },
  tooLarge: { code: 'payload_too_large', message: 'Request body is too large' },
  notAuthorized: { code: 'forbidden', message: 'this request is not authorized here' },
  malformedAuthorization: { code: 'malformed_authorization', message: 'the Authorization header must be "Bearer <key>"' },
  revoked: { code: 'key_revoked', message: 'this key has been revoked' },
  expired: { code: 'key_expired', message: 'this key has expired' },
  conflictingKeys: { code: 'conflicting_keys', message: 'the Authorization header and the envelope carry different keys' },
} satisfies Record<string, ErrorExample>;

export const permissionDenied = (method: string): ErrorExample => ({ code: 'permission_denied', message: `this key may not call "${method}"` });
