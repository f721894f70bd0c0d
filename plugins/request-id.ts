import fp from 'fastify-plugin';
import type { FastifyPluginAsync, onRequestHookHandler } from 'fastify';
import { REQUEST_ID_HEADER } from '../src/http/request-id.js';

// Callback style: every request passes here. Set before any other hook, so every answer carries it, refusals
// included.
const echoRequestId: onRequestHookHandler = (request, reply, done) => {
  reply.header(REQUEST_ID_HEADER, request.id);
  done();
};

/**
 * Echoes the request's id (the caller's valid `X-Request-Id`, else a generated one: `requestIdFor`, the app's
 * `genReqId`) in the answer, so a caller can quote it and an operator find every log line of the request
 * (`reqId`).
 */
const requestId: FastifyPluginAsync = async (app) => {
  app.addHook('onRequest', echoRequestId);
};

export default fp(requestId, { name: 'fleetplane-request-id' });
