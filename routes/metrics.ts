import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import { ErrorReply } from '../schemas/common.js';

/** Prometheus text aggregated over the primary and every worker; a key with `metrics.read` unless public. */
const metrics: FastifyPluginAsyncTypebox = async (app) => {
  const open = app.fleetplane.config.metrics.public;
  app.get(
    '/metrics',
    {
      schema: {
        tags: ['probes'],
        summary: 'Prometheus metrics of the whole server',
        response: { 200: Type.String(), 403: ErrorReply },
      },
      ...(open ? {} : { preHandler: app.requirePermission('metrics.read') }),
    },
    async (_request, reply) => {
      reply.header('cache-control', 'no-store');
      const text = await app.fleetplane.metricsText();
      return reply.type('text/plain; version=0.0.4; charset=utf-8').send(text);
    },
  );
};

export default metrics;
