import fp from 'fastify-plugin';
import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import { errorBody } from '../src/errors.js';
import { sendError } from './error-reply.js';

/**
 * Probes, metrics and the control surface answer for the node, not for a tenant: shedding the organization that
 * owns their host must neither fail the load balancer's checks nor take away the way to end the shedding.
 */
const NEVER_SHED = new Set(['/healthz', '/readyz', '/metrics', '/control']);

/**
 * Requests of a shed organization get the fallback — a 307 to the fallback target with
 * `Connection: close`, or 503 with `Retry-After` when there is none — so the load balancer sends them to
 * another node. Costs nothing while nothing is shed.
 */
const shed: FastifyPluginAsync = async (app) => {
  const server = app.fleetplane;
  const { fallback } = server.config;
  /** Answers the fallback when the request's organization is shed; true when it did. */
  const answerIfShed = async (request: FastifyRequest, reply: FastifyReply): Promise<boolean> => {
    const organization = await app.organizationOf(request);
    if (!organization || !server.state.isShed(organization._id)) return false;
    reply.raw.shouldKeepAlive = false;
    reply.header('cache-control', 'no-store').header('connection', 'close');
    if (fallback.redirect) {
      reply.code(307).header('location', fallback.redirect.replace(/\/+$/, '') + request.url).send();
      return true;
    }
    sendError(reply, 503, errorBody('unavailable', 'this organization is not served on this node right now; retry later'), { 'retry-after': String(fallback.retryAfterS) });
    return true;
  };
  // A step of the request guard's hook: while nothing is shed (nearly always) a request passes without a promise.
  app.addRequestStep((request, reply) => {
    if (!server.state.shedding.size || NEVER_SHED.has(request.url.split('?', 1)[0]!)) return undefined;
    return answerIfShed(request, reply);
  });
};

export default fp(shed, { name: 'fleetplane-shed', dependencies: ['fleetplane-services', 'fleetplane-request-guard'] });
