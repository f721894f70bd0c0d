import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import { ENVELOPE_ERRORS, answerOf, errorReply } from '../schemas/errors.js';
import { WebhookParams, WebhookPayload, WebhookReply } from '../schemas/webhooks.js';
import type { FailureLog } from '../plugins/errors.js';
import { WEBHOOK_ERRORS, webhooksUnavailable } from '../src/webhooks/errors.js';

const NAME = /^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$/;

/** A refused signature is logged by the error handler naming the webhook. */
const failureLog: FailureLog = { message: 'webhook delivery failed', context: (request) => ({ webhook: (request.params as { '*': string })['*'] }) };

/**
 * `POST /webhooks/<name>`. Senders carry no key: the signature over the raw body is the proof, so
 * this route keeps the body as bytes (its own JSON parser, in this plugin only) and parses it after verifying.
 */
const webhooks: FastifyPluginAsyncTypebox = async (app) => {
  const server = app.fleetplane;
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (_request, body, done) => done(null, body));

  const notFound = WEBHOOK_ERRORS.unknownWebhook;

  // Runs started after a 202 are part of this worker's in-flight work: closing the app (shutdown,
  // restart) waits for them. Each run is bounded by its workflow's time limit, so the wait is too.
  const running = new Set<Promise<void>>();
  app.addHook('onClose', async () => {
    while (running.size > 0) await Promise.all(running);
  });

  app.post(
    '/webhooks/*',
    {
      config: { envelope: true, failureLog },
      schema: {
        tags: ['webhooks'],
        operationId: 'deliverWebhook',
        summary: 'Deliver a webhook: verified on the raw body, then its event runs the mapped workflow after the reply',
        description:
          'No key: the hmac-sha256 signature (or static token) header configured for the webhook is the authorization. ' +
          'The event name comes from the configured header or payload field; when it maps to a workflow the answer is 202 and ' +
          'the workflow runs after it (the sender never waits for it, nor sees its outcome); an event without a workflow is 200.',
        security: [],
        params: WebhookParams,
        body: WebhookPayload,
        response: {
          200: Type.Object(WebhookReply.properties, { description: 'Verified; no workflow is mapped to this event', examples: [{ accepted: false, event: 'ping', workflow: null }] }),
          202: Type.Object(WebhookReply.properties, { description: 'Verified; the mapped workflow runs after this reply', examples: [{ accepted: true, event: 'push', workflow: 'make-item' }] }),
          400: errorReply(
            'The payload is not JSON, or it lacks the event name',
            WEBHOOK_ERRORS.invalidBody.example('Unexpected end of JSON input'),
            WEBHOOK_ERRORS.missingEvent.example('header x-github-event'),
          ),
          401: errorReply('The signature or token does not match the webhook secret', WEBHOOK_ERRORS.invalidSignature.example('github')),
          404: errorReply('No webhook of this name for the request host', WEBHOOK_ERRORS.unknownWebhook.example('github')),
          413: errorReply('The payload is larger than 1 MiB', ENVELOPE_ERRORS.tooLarge),
          503: errorReply(
            'Webhooks are not available on this server, or this webhook is misconfigured',
            answerOf(webhooksUnavailable()),
            WEBHOOK_ERRORS.webhookUnavailable.example('webhook "github" is misconfigured'),
          ),
        },
      },
    },
    async (request, reply) => {
      const name = request.params['*'];
      if (!server.webhooks) throw webhooksUnavailable();
      if (!NAME.test(name)) throw notFound(name.slice(0, 64));
      const organization = await app.organizationOf(request);
      // An unknown host answers like an unknown webhook: nothing tells a sender which tenants exist.
      if (!organization) throw notFound(name);
      server.organizations?.touch(organization._id);
      const outcome = await server.webhooks.receive({ organization_id: organization._id, name, headers: request.headers, rawBody: request.body as Buffer });
      if (!outcome.accepted) return reply.code(200).send({ accepted: false, event: outcome.event, workflow: null });
      const log = request.log;
      const details = { webhook: name, event: outcome.event, workflow: outcome.workflow };
      // After the reply is written: the sender never waits for the workflow, and never sees its outcome.
      reply.raw.once('finish', () => {
        const run = outcome
          .run()
          .then(
            () => log.info(details, 'webhook workflow finished'),
            (error: unknown) => log.error({ ...details, reason: error instanceof Error ? error.message : String(error) }, 'webhook workflow failed'),
          )
          .finally(() => running.delete(run));
        running.add(run);
      });
      return reply.code(202).send({ accepted: true, event: outcome.event, workflow: outcome.workflow });
    },
  );
};

export default webhooks;
