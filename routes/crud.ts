import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { ErrorReply } from '../schemas/common.js';
import { CrudReply, CrudRequest } from '../schemas/crud.js';
import { CrudError } from '../src/crud/errors.js';
import { runCrud } from '../src/crud/run.js';

type Status = 400 | 403 | 409 | 413 | 503;

/** `POST /crud` (SPEC 7.3): object.create/read/update/delete on a collection of the caller's organization. */
const crud: FastifyPluginAsyncTypebox = async (app) => {
  app.post(
    '/crud',
    {
      config: { envelope: true },
      schema: {
        tags: ['data'],
        summary: "Create, read, update or delete documents of the caller's organization",
        security: [{ bearer: [] }],
        body: CrudRequest,
        response: { 200: CrudReply, 400: ErrorReply, 403: ErrorReply, 405: ErrorReply, 409: ErrorReply, 413: ErrorReply, 415: ErrorReply, 503: ErrorReply },
      },
      preHandler: app.authorizeEnvelope,
    },
    async (request, reply) => {
      try {
        return await runCrud(app.db, request.envelope!);
      } catch (error) {
        if (!(error instanceof CrudError)) throw error;
        return reply.code(error.statusCode as Status).send({ error: { code: error.code, message: error.message } });
      }
    },
  );
};

export default crud;
