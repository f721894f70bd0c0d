import type { FastifyReply } from 'fastify';
import type { ErrorBody } from '../src/errors.js';

/**
 * Writes an error answer as every route and plugin does: the status, `Cache-Control: no-store`, the error's own
 * headers (`Retry-After`...) and the one body shape.
 */
export function sendError(reply: FastifyReply, statusCode: number, body: ErrorBody, headers?: Readonly<Record<string, string>>): FastifyReply {
  reply.code(statusCode).header('cache-control', 'no-store');
  if (headers) reply.headers(headers);
  return reply.send(body);
}
