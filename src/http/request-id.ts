import { randomUUID } from 'node:crypto';
import type { IncomingMessage } from 'node:http';

export const REQUEST_ID_HEADER = 'x-request-id';

/** Visible ASCII only, at most 128 characters: an id that goes into logs and headers verbatim. */
const VALID_REQUEST_ID = /^[\x21-\x7e]{1,128}$/;

/**
 * The caller's `X-Request-Id` when it is one we can pass on safely, else a fresh UUID. A header sent twice
 * arrives joined with `, ` and so is replaced too: which of the two would be the caller's id?
 */
export function requestIdFor(request: IncomingMessage): string {
  const given = request.headers[REQUEST_ID_HEADER];
  return typeof given === 'string' && VALID_REQUEST_ID.test(given) ? given : randomUUID();
}
