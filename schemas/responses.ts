import { Type } from '@sinclair/typebox';
import { AUTH_ERRORS } from '../src/auth/errors.js';
import { CRUD_ERRORS } from '../src/crud/errors.js';
import { errorReply, type ErrorExample } from './errors.js';

/** Response headers as the document declares them (a schema per header, described). */
export const HEADERS = {
  cacheControl: { 'Cache-Control': { type: 'string', enum: ['no-store'], description: 'Replies are never cached' } },
  allow: { Allow: { type: 'string', enum: ['POST'], description: 'The only method this path takes' } },
  retryAfter: { 'Retry-After': { type: 'integer', minimum: 1, description: 'Seconds to wait before trying again' } },
  fallbackRetryAfter: { 'Retry-After': { type: 'integer', minimum: 1, description: "Seconds to wait before trying again; sent with the fallback's answer" } },
  location: { Location: { type: 'string', format: 'uri', description: 'Where to repeat the request: the fallback target plus the original path and query' } },
  connection: { Connection: { type: 'string', enum: ['close'], description: 'The connection is closed after this reply' } },
} as const;

export const DUPLICATE_HEADER: ErrorExample = { code: 'duplicate_header', message: 'the Host header may appear only once' };
export const TOO_MANY_FAILURES: ErrorExample = AUTH_ERRORS.tooManyRequests.example(30);
export const FALLBACK_UNAVAILABLE: ErrorExample = { code: 'unavailable', message: 'no worker is serving on this node; retry later' };
export const SHED_UNAVAILABLE: ErrorExample = { code: 'unavailable', message: 'this organization is not served on this node right now; retry later' };
export const STORE_UNAVAILABLE: ErrorExample = CRUD_ERRORS.storeUnavailable.example();
/** Names for examples whose code alone does not tell them apart. */
export const EXAMPLE_NAMES: ReadonlyMap<string, string> = new Map([
  [FALLBACK_UNAVAILABLE.message, 'no_worker_serving'],
  [SHED_UNAVAILABLE.message, 'organization_shed'],
]);

/** Every route: the request guard refuses a duplicated `Host` or `Authorization` header before any route runs. */
export const DUPLICATE_HEADER_REPLY = errorReply('The request has more than one `Host` or `Authorization` header (refused before any route runs)', DUPLICATE_HEADER);

/** Every route: the request guard refuses a `Transfer-Encoding` other than `chunked` alone before any route runs. */
export const UNSUPPORTED_TRANSFER_ENCODING_REPLY = errorReply('The request has a `Transfer-Encoding` other than `chunked` alone (refused before any route runs; the connection is closed)', {
  code: 'unsupported_transfer_encoding',
  message: 'transfer-encoding gzip, chunked is not supported: send the body with chunked alone or a Content-Length',
});

/** Every route that takes a key: an address past its failed-authentication limit. */
export const TOO_MANY_FAILURES_REPLY = errorReply('Too many failed authentications from this client address; retry after `Retry-After` seconds', TOO_MANY_FAILURES);

/** Every envelope route, for any method but POST. */
export const METHOD_NOT_ALLOWED_REPLY = errorReply('Any method but POST: envelopes are POSTed (see `Allow`)', {
  code: 'method_not_allowed',
  message: 'GET is not allowed here; envelopes are POSTed',
});

/** Every envelope route, for a body that is not `application/json`. */
export const UNSUPPORTED_MEDIA_TYPE_REPLY = errorReply('The request `Content-Type` is not `application/json`', {
  code: 'unsupported_media_type',
  message: 'content-type must be application/json',
});

/** Every POST route, for a body sent with a `Content-Encoding` other than `identity` (bodies are never decoded). */
export const UNSUPPORTED_ENCODING_REPLY = errorReply('The request body has a `Content-Encoding` other than `identity`: bodies are taken as sent, never decompressed', {
  code: 'unsupported_encoding',
  message: 'content-encoding gzip is not accepted: send the body uncompressed',
});

/**
 * The fallback: this node does not serve the request (no worker takes traffic, or the organization is shed
 * here), and a load balancer URL or a mesh peer is known to send it to instead. No body.
 */
export const FALLBACK_REDIRECT_REPLY = {
  type: 'null',
  description: 'This node does not serve the request right now (its workers are cordoned, draining or starting, or the organization is shed here): repeat it at `Location`',
  headers: { ...HEADERS.location, ...HEADERS.cacheControl, ...HEADERS.connection },
};

/** The fallback without a place to send the request to. */
export const FALLBACK_UNAVAILABLE_REPLY = errorReply(
  'This node does not serve the request right now and knows no other to send it to; retry after `Retry-After` seconds',
  FALLBACK_UNAVAILABLE,
  SHED_UNAVAILABLE,
);

/** Every route that takes a key: the data store cannot be reached (authorization and data both need it). */
export const STORE_UNAVAILABLE_REPLY = errorReply('The data store cannot be reached right now; nothing was written; retry later', STORE_UNAVAILABLE);

/** `GET /docs`: the UI page (its scripts and styles are separate, unlisted paths). */
export const DOCS_PAGE_REPLY = {
  description: 'The interactive documentation page',
  content: { 'text/html': { schema: Type.String({ description: 'HTML' }) } },
};

/** `GET /ws`: the upgrade succeeded; from here on the connection speaks WebSocket, not HTTP. */
export const SWITCHING_PROTOCOLS_REPLY = { type: 'null', description: 'Switching Protocols: the WebSocket is open; frames are JSON envelopes in, replies and events out' };
