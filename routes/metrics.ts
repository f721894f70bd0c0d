import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import { ErrorReply } from '../schemas/common.js';

/** Prometheus text aggregated over the primary and every worker. */
const metrics: FastifyPluginAsyncTypebox = async (app) => {
  app.get(
    '/metrics',
    {
      schema: {
        tags: ['probes'],
        summary: 'Prometheus metrics of the whole server',
        response: { 200: Type.String(), 403: ErrorReply },
      },
    },
    async (_request, reply) => {
      reply.header('cache-control', 'no-store');
      if (!app.fleetplane.config.metrics.public) {
        return reply.code(403).send({ error: { code: 'forbidden', message: 'metrics need a key with metrics.read (or metrics.public: true)' } });
      }
      const text = await app.fleetplane.metricsText();
      return reply.type('text/plain; version=0.0.4; charset=utf-8').send(text);
    },
  );
};

export default metrics;
