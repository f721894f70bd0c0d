import type { IncomingMessage } from 'node:http';
import fp from 'fastify-plugin';
import type { FastifyPluginAsync, FastifyReply, FastifyRequest, onRequestHookHandler } from 'fastify';
import { errorBody } from '../src/errors.js';
import { sendError } from './error-reply.js';
import { echoRequestId } from './request-id.js';
import { markEnvelopeAnswer } from './envelope.js';
import { duplicatedHeader, duplicateHeaderMessage, type AmbiguousHeader } from '../src/http/duplicate-headers.js';
import { unsupportedTransferEncoding, unsupportedTransferEncodingMessage } from '../src/http/transfer-encoding.js';

/** Node sets `upgrade` on the requests it hands to 'upgrade' listeners; its typings leave it out. */
const isUpgrade = (request: FastifyRequest) => (request.raw as IncomingMessage & { upgrade?: boolean }).upgrade === true;

/**
 * An upgrade request that gets an ordinary HTTP answer (a 404, a refusal) is answered on a socket the HTTP
 * server has let go of: no timeout and no keep-alive logic will ever close it, so close it once the answer is
 * out. A request that is upgraded is hijacked and never finishes its answer.
 */
export function closeUpgradeOnAnswer(request: FastifyRequest, reply: FastifyReply): void {
  if (isUpgrade(request)) reply.raw.once('finish', () => request.raw.socket.destroySoon());
}

/** Answers 400 `duplicate_header` and closes the connection: what else the client sent cannot be trusted. */
export function refuseDuplicateHeader(name: AmbiguousHeader, reply: FastifyReply): void {
  reply.raw.shouldKeepAlive = false;
  sendError(reply, 400, errorBody('duplicate_header', duplicateHeaderMessage(name)), { connection: 'close' });
}

/**
 * Answers 501 `unsupported_transfer_encoding` (RFC 9112's answer to a transfer coding the server does not apply)
 * and closes the connection: the body that follows is not read.
 */
export function refuseTransferEncoding(header: string, reply: FastifyReply): void {
  reply.raw.shouldKeepAlive = false;
  sendError(reply, 501, errorBody('unsupported_transfer_encoding', unsupportedTransferEncodingMessage(header)), { connection: 'close' });
}

/**
 * The `Content-Encoding` of a POST body that is not sent as it is, or undefined. Bodies are never decompressed:
 * a compressed body taken as it is would be garbage (or, plain JSON mislabelled, accepted under a false
 * label), and decoding would need the body limit applied after inflation to be safe from zip bombs.
 */
function refusedEncoding(request: FastifyRequest): string | undefined {
  if (request.method !== 'POST') return undefined;
  const header = request.headers['content-encoding'];
  if (header === undefined) return undefined;
  const codings = header.split(',').map((coding) => coding.trim().toLowerCase()).filter(Boolean);
  return codings.every((coding) => coding === 'identity') ? undefined : codings.join(', ') || header;
}

/**
 * One step of the request guard's hook, after its own checks: `undefined` lets the request go on (at once, no
 * promise), `true` says the step answered it, a promise says later whether it answered. Plugins that need a
 * look at every request before routing (CORS, shedding) add a step instead of a hook of their own, so that a
 * request passes one onRequest hook, not one per plugin.
 */
export type RequestStep = (request: FastifyRequest, reply: FastifyReply) => undefined | true | Promise<boolean>;

declare module 'fastify' {
  interface FastifyInstance {
    /** Adds a step to the request guard's hook, run in the order added, for every request of the app. */
    addRequestStep(step: RequestStep): void;
  }
}

/** Runs `steps` from `from` on; calls `done` once they all let the request go on, never when one answered. */
function runSteps(steps: readonly RequestStep[], from: number, request: FastifyRequest, reply: FastifyReply, done: (error?: Error) => void): void {
  for (let index = from; index < steps.length; index += 1) {
    const outcome = steps[index]!(request, reply);
    if (outcome === undefined) continue;
    if (outcome === true) return;
    outcome
      .then((answered) => {
        if (!answered) runSteps(steps, index + 1, request, reply, done);
      })
      .catch(done);
    return;
  }
  done();
}

/**
 * The first hook of every request (registered before any other). Checks on the raw request before any other
 * hook, route or authorization sees it: more than one `Host` or
 * `Authorization` header is refused, a `Transfer-Encoding` other than `chunked` alone is refused (501
 * `unsupported_transfer_encoding`), a POST body with a `Content-Encoding` other than `identity` is refused
 * (415 `unsupported_encoding`), and upgrade requests answered over HTTP close their socket. The WebSocket
 * upgrade passes here too: `@fastify/websocket` routes it like any request. Then the steps other plugins added.
 */
const requestGuard: FastifyPluginAsync = async (app) => {
  const steps: RequestStep[] = [];
  app.decorate('addRequestStep', (step: RequestStep) => void steps.push(step));
  // Callback style: every request passes here, and one that passes costs no promise. What every request needs
  // before anything else, in this order: its id echoed, an envelope route's `no-store` (set before any hook can
  // answer, so every answer of the route has it, refusals and preflights included), the checks, the steps.
  const guard: onRequestHookHandler = (request, reply, done) => {
    echoRequestId(request, reply);
    if (request.routeOptions.config?.envelope) markEnvelopeAnswer(reply);
    closeUpgradeOnAnswer(request, reply);
    const duplicated = duplicatedHeader(request.raw.rawHeaders);
    if (duplicated !== undefined) return refuseDuplicateHeader(duplicated, reply);
    const transfer = unsupportedTransferEncoding(request.headers['transfer-encoding']);
    if (transfer !== undefined) return refuseTransferEncoding(transfer, reply);
    const encoding = refusedEncoding(request);
    if (encoding === undefined) return runSteps(steps, 0, request, reply, done);
    sendError(reply, 415, errorBody('unsupported_encoding', `content-encoding ${encoding.slice(0, 64)} is not accepted: send the body uncompressed`));
  };
  app.addHook('onRequest', guard);
};

export default fp(requestGuard, { name: 'fleetplane-request-guard' });
