import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { CrudReply, CrudRequest } from '../schemas/crud.js';
import { ENVELOPE_ERRORS, errorReply, permissionDenied } from '../schemas/errors.js';
import { runCrud } from '../src/crud/run.js';
import { CRUD_ERRORS } from '../src/crud/errors.js';
import { DocumentTooLargeError } from '../src/db/errors.js';
import { MAX_DOCUMENT_BYTES } from '../src/db/validate.js';

/** `POST /crud`: object.create/read/update/delete on a collection of the caller's organization. */
const crud: FastifyPluginAsyncTypebox = async (app) => {
  app.post(
    '/crud',
    {
      config: { envelope: true },
      schema: {
        tags: ['data'],
        operationId: 'crud',
        summary: "Create, read, update or delete documents of the caller's organization",
        description:
          'One envelope per call: `object.create` inserts `documents`, `object.read` returns the documents matching `filter` ' +
          '(with `sort` and `limit`), `object.update` applies `update` to the matches, `object.delete` removes them. Only the ' +
          "caller's organization is ever read or written; fields that hold secrets are shown as `[redacted]` and cannot be queried.",
        security: [{ bearer: [] }],
        body: CrudRequest,
        response: {
          200: CrudReply,
          400: errorReply(
            'The body is not valid JSON, the envelope is not valid for its method, or a document it would write is not valid for its collection',
            ENVELOPE_ERRORS.invalidJson,
            { code: 'invalid_request', message: 'collection: is required' },
            CRUD_ERRORS.invalidEnvelope.example('documents: not used by object.read'),
            CRUD_ERRORS.secretField.example('headers.Authorization', 'apis.headers'),
            CRUD_ERRORS.readOnly.example(),
            CRUD_ERRORS.invalidDocument.example('documents.0: baseUrl: must be an http or https URL'),
          ),
          403: errorReply('The key is missing, unknown, revoked or expired, or may not use this method on this collection', ENVELOPE_ERRORS.notAuthorized, permissionDenied('object.delete'), ENVELOPE_ERRORS.revoked),
          409: errorReply('A document with the same unique field already exists', CRUD_ERRORS.duplicateKey.example('organization_id_1_name_1')),
          413: errorReply(
            'The body is larger than 1 MiB, or a document is larger than the store takes',
            ENVELOPE_ERRORS.tooLarge,
            CRUD_ERRORS.documentTooLarge.example(new DocumentTooLargeError(undefined, MAX_DOCUMENT_BYTES).message),
          ),
          503: errorReply('The data store is not available on this server', CRUD_ERRORS.unavailable.example()),
        },
      },
      preHandler: app.authorizeEnvelope,
    },
    // The body schema is `CrudEnvelope` itself, so the engine checks only the per-method rules.
    async (request) => runCrud(app.db, request.envelope!, { maxCollections: app.fleetplane.config.db?.maxCollectionsPerOrganization, schemaChecked: true }),
  );
};

export default crud;
