import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { ProbeReply } from '../schemas/common.js';

/** Liveness and readiness probes for load balancers and orchestrators. */
const health: FastifyPluginAsyncTypebox = async (app) => {
  const probe = () => ({ status: String(app.fleetplane.status), server: app.fleetplane.id, worker: app.fleetplane.workerId });

  app.get(
    '/healthz',
    {
      schema: {
        tags: ['probes'],
        summary: 'Liveness: 200 while this process serves',
        response: { 200: ProbeReply },
      },
    },
    async (_request, reply) => {
      reply.header('cache-control', 'no-store');
      return probe();
    },
  );

  app.get(
    '/readyz',
    {
      schema: {
        tags: ['probes'],
        summary: 'Readiness: 200 when this worker takes traffic, 503 otherwise',
        response: { 200: ProbeReply, 503: ProbeReply },
      },
    },
    async (_request, reply) => {
      reply.header('cache-control', 'no-store');
      return reply.code(app.fleetplane.getHealth().ready ? 200 : 503).send(probe());
    },
  );
};

export default health;
