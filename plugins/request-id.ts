import type { FastifyReply, FastifyRequest } from 'fastify';
import { REQUEST_ID_HEADER } from '../src/http/request-id.js';

/**
 * Echoes the request's id (the caller's valid `X-Request-Id`, else a generated one: `requestIdFor`, the app's
 * `genReqId`) in the answer, so a caller can quote it and an operator find every log line of the request
 * (`reqId`). Called first by the request guard's hook, so every answer carries it, refusals included.
 */
export function echoRequestId(request: FastifyRequest, reply: FastifyReply): void {
  reply.header(REQUEST_ID_HEADER, request.id);
}
