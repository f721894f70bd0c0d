import { STATUS_CODES } from 'node:http';
import type { Duplex } from 'node:stream';
import { errorBody } from '../errors.js';

/**
 * A complete HTTP/1.1 error response in the one error shape, for answers written straight to a socket: the
 * request could not be parsed, so there is no `ServerResponse` to write it with.
 */
export function rawErrorResponse(status: number, code: string, message: string): string {
  const body = JSON.stringify(errorBody(code, message));
  return (
    `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? 'Error'}\r\n` +
    'Content-Type: application/json; charset=utf-8\r\n' +
    `Content-Length: ${Buffer.byteLength(body)}\r\n` +
    'Cache-Control: no-store\r\n' +
    'Connection: close\r\n\r\n' +
    body
  );
}

// Node's parser counts the request line in its header size limit, so an over-long URL is a 431 too.
const HEADERS_TOO_LARGE = rawErrorResponse(431, 'headers_too_large', 'the request line and headers are larger than this server accepts');
const CHUNK_EXTENSIONS_TOO_LARGE = rawErrorResponse(413, 'payload_too_large', 'chunk extensions are larger than this server accepts');
const REQUEST_TIMEOUT = rawErrorResponse(408, 'request_timeout', 'the request was not received in time');
const MALFORMED = rawErrorResponse(400, 'bad_request', 'malformed HTTP request');

function responseFor(code: string | undefined): string {
  switch (code) {
    case 'HPE_HEADER_OVERFLOW':
      return HEADERS_TOO_LARGE;
    case 'HPE_CHUNK_EXTENSIONS_OVERFLOW':
      return CHUNK_EXTENSIONS_TOO_LARGE;
    case 'ERR_HTTP_REQUEST_TIMEOUT':
      return REQUEST_TIMEOUT;
    default:
      return MALFORMED;
  }
}

/**
 * A `clientError` listener for an HTTP server: the parser refused what the client sent (or the client was too
 * slow), so answer in the one error shape and close. The safety checks are Node's and Fastify's own: a reset
 * connection is already gone, and a response already on its way must not be corrupted by a second one.
 */
export function answerClientError(error: Error & { code?: string }, socket: Duplex): void {
  if (error.code === 'ECONNRESET' || socket.destroyed) return;
  const inFlight = (socket as Duplex & { _httpMessage?: { headersSent?: boolean } | null })._httpMessage;
  if (socket.writable && !inFlight?.headersSent) socket.write(responseFor(error.code));
  socket.destroy(error);
}
