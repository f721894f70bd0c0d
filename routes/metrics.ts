import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import { ENVELOPE_ERRORS, errorReply, permissionDenied } from '../schemas/errors.js';

const EXAMPLE = [
  '# HELP fleetplane_worker_restarts_total Workers forked to replace a crashed one',
  '# TYPE fleetplane_worker_restarts_total counter',
  'fleetplane_worker_restarts_total 0',
  '# HELP fleetplane_connections_handed_total Connections handed to workers',
  '# TYPE fleetplane_connections_handed_total counter',
  'fleetplane_connections_handed_total 1532',
  '',
].join('\n');

/** Prometheus text aggregated over the primary and every worker; a key with `metrics.read` unless public. */
const metrics: FastifyPluginAsyncTypebox = async (app) => {
  const open = app.fleetplane.config.metrics.public;
  app.get(
    '/metrics',
    {
      schema: {
        tags: ['probes'],
        operationId: 'getMetrics',
        summary: 'Prometheus metrics of the whole server',
        description:
          'The primary and every worker, aggregated, in the Prometheus text format (version 0.0.4). Needs a key with ' +
          '`metrics.read` unless `metrics.public` is set. Never redirected: while no worker serves, the primary answers it.',
        response: {
          200: {
            description: 'Prometheus text exposition format, version 0.0.4',
            content: { 'text/plain': { schema: Type.String({ description: 'Prometheus text format' }), example: EXAMPLE } },
          },
          403: errorReply('The key is missing, unknown, revoked or expired, or lacks `metrics.read`', ENVELOPE_ERRORS.notAuthorized, permissionDenied('metrics.read')),
        },
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
