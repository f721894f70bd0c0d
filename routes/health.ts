import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { probeReply } from '../schemas/common.js';
import { FLEETPLANE_VERSION } from '../src/version.js';

/** Liveness and readiness probes for load balancers and orchestrators. */
const health: FastifyPluginAsyncTypebox = async (app) => {
  const probe = () => ({ status: String(app.fleetplane.status), server: app.fleetplane.id, worker: app.fleetplane.workerId, version: FLEETPLANE_VERSION });

  app.get(
    '/healthz',
    {
      schema: {
        tags: ['probes'],
        operationId: 'getLiveness',
        summary: 'Liveness: 200 while this process serves',
        description: 'For orchestrators: 200 as long as the process answers, whatever its status. When no worker takes traffic the primary answers it itself (`worker` 0).',
        response: { 200: probeReply('The answering process is alive; `status` says what it is doing', { status: 'ready', server: 'srv-a', worker: 2, version: '0.1.0' }) },
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
        operationId: 'getReadiness',
        summary: 'Readiness: 200 when this worker takes traffic, 503 otherwise',
        description:
          'For load balancers: 503 takes the node out of rotation. It turns 503 before the last serving workers are cordoned, ' +
          'drained or shut down, and stays 503 (`status` `fallback`, answered by the primary) while no worker takes traffic.',
        response: {
          200: probeReply('This worker takes traffic', { status: 'ready', server: 'srv-a', worker: 2, version: '0.1.0' }),
          503: probeReply('Not ready: starting, draining, cordoned or stopping, or no worker serves (`status` says which)', { status: 'fallback', server: 'srv-a', worker: 0, version: '0.1.0' }),
        },
      },
    },
    async (_request, reply) => {
      reply.header('cache-control', 'no-store');
      return reply.code(app.fleetplane.getHealth().ready ? 200 : 503).send(probe());
    },
  );
};

export default health;
