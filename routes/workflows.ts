import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { FailureLog } from '../plugins/errors.js';
import { ENVELOPE_ERRORS, answerOf, errorReply, permissionDenied } from '../schemas/errors.js';
import { API_ERRORS } from '../src/api/errors.js';
import { WorkflowParams, WorkflowReply, WorkflowRequest, workflowErrorReply } from '../schemas/workflows.js';
import { RESERVED_WORKFLOW_NAMES } from '../src/workflows/definition.js';
import { WORKFLOW_ERRORS, workflowsUnavailable } from '../src/workflows/errors.js';
import { FleetplaneError } from '../src/errors.js';

const ENVELOPE_FIELDS = new Set(['method', 'apikey']);

/**
 * Before validation and authorization: the body holds the inputs under the workflow's name and nothing else,
 * and the route names the method, so a key's permission for `workflow.<name>` is what is checked.
 */
function prepareEnvelope(request: FastifyRequest, _reply: FastifyReply, done: (error?: FleetplaneError) => void): void {
  // Callback style (no promise per request); a refusal goes to the error handler.
  const { name } = request.params as { name: string };
  const body = request.body;
  const refuse = (reason: string) => done(WORKFLOW_ERRORS.invalidRequest(reason));
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return refuse('body: must be an object { "<name>": [input, ...] }');
  if (RESERVED_WORKFLOW_NAMES.has(name)) return refuse(`name: "${name}" is reserved`);
  const fields = body as Record<string, unknown>;
  const method = `workflow.${name}`;
  if (fields.method !== undefined && fields.method !== method) return done(WORKFLOW_ERRORS.methodMismatch(method, String(fields.method)));
  for (const key of Object.keys(fields)) {
    if (key !== name && !ENVELOPE_FIELDS.has(key)) return refuse(`${key}: unknown field (the inputs go under "${name}")`);
  }
  if (!Array.isArray(fields[name])) return refuse(`${name}: is required, a list of inputs`);
  // The parsed body is this request's own object: completing it in place spares a copy per request.
  fields.method = method;
  fields.name = name;
  done();
}

/** A run that failed on the server's side is logged by the error handler naming the workflow (and its step). */
const failureLog: FailureLog = { message: 'workflow failed', context: (request) => ({ workflow: (request.params as { name: string }).name }) };

/** `POST /workflows/<name>`: one run per input, results in order under the workflow's name. */
const workflows: FastifyPluginAsyncTypebox = async (app) => {
  const server = app.fleetplane;
  app.post(
    '/workflows/:name',
    {
      config: { envelope: true, failureLog },
      schema: {
        tags: ['workflows'],
        operationId: 'runWorkflow',
        summary: 'Run a workflow once per input',
        description:
          'The body holds the inputs under the workflow name: `{ "<name>": [input, ...] }` (at most 100). Each input is one run; ' +
          'the results come back in the order of the inputs. The key needs the permission `workflow.<name>`. The first run that ' +
          'fails decides the answer, which names the failing step.',
        security: [{ bearer: [] }],
        params: WorkflowParams,
        body: WorkflowRequest,
        response: {
          200: WorkflowReply,
          400: workflowErrorReply(
            'The body is not valid JSON, not `{ "<name>": [input, ...] }`, or an input lacks a value the workflow reads',
            ENVELOPE_ERRORS.invalidJson,
            WORKFLOW_ERRORS.invalidRequest.example('make-item: is required, a list of inputs'),
            WORKFLOW_ERRORS.methodMismatch.example('workflow.make-item', 'workflow.other'),
            answerOf(WORKFLOW_ERRORS.missingReference('input.title').atStep('create')),
          ),
          403: errorReply('The key is missing, unknown, revoked or expired, or may not run this workflow', ENVELOPE_ERRORS.notAuthorized, permissionDenied('workflow.make-item'), ENVELOPE_ERRORS.expired),
          404: errorReply('The organization has no workflow of this name', WORKFLOW_ERRORS.unknownWorkflow.example('make-item')),
          413: errorReply('The body is larger than 1 MiB', ENVELOPE_ERRORS.tooLarge),
          422: workflowErrorReply(
            'The stored workflow cannot run: it is invalid, nests too deeply or takes too many steps, a step was refused (an unknown api, endpoint or workflow), or a step reads a value an earlier step did not give',
            WORKFLOW_ERRORS.invalidWorkflow.example('make-item', 'steps.0.api: is required'),
            answerOf(WORKFLOW_ERRORS.stepRefused(API_ERRORS.unknownApi('items').message).atStep('create')),
            answerOf(WORKFLOW_ERRORS.stepRefused('no workflow "build"').atStep('create')),
            answerOf(WORKFLOW_ERRORS.missingStepValue('steps.create.id').atStep('notify')),
            answerOf(WORKFLOW_ERRORS.depthExceeded(8).atStep('again')),
          ),
          502: workflowErrorReply('A step\'s provider or target failed', answerOf(WORKFLOW_ERRORS.stepFailed(API_ERRORS.upstreamFailed('items', 500).message).atStep('create'))),
          503: workflowErrorReply(
            'Workflows are not available on this server, or what a step needs is not available here',
            answerOf(workflowsUnavailable()),
            answerOf(WORKFLOW_ERRORS.unavailable(API_ERRORS.unavailable().message).atStep('create')),
          ),
          504: workflowErrorReply(
            'A run did not finish within the workflow time limit, or a step\'s provider did not answer within its own timeout',
            answerOf(WORKFLOW_ERRORS.workflowTimeout('make-item', 30_000).within('step "create": ', 'create')),
            answerOf(WORKFLOW_ERRORS.stepTimeout(API_ERRORS.upstreamTimeout('items', 5000).message).atStep('create')),
          ),
        },
      },
      preValidation: prepareEnvelope,
      preHandler: app.authorizeEnvelope,
    },
    async (request) => {
      const { name } = request.params;
      if (!server.workflow) throw workflowsUnavailable();
      const envelope = request.envelope!;
      const results = await server.workflow.runEach(name, envelope[name] as unknown[], { organization_id: envelope.organization_id });
      return { [name]: results };
    },
  );
};

export default workflows;
