import t from 'tap';
import { API_ERRORS } from '../../src/api/errors.js';
import { compileWorkflow } from '../../src/workflows/definition.js';
import { runWorkflow, type EngineDeps } from '../../src/workflows/engine.js';
import { WorkflowError } from '../../src/workflows/errors.js';

// A step's API call is given what is left of the run. When that call's timer fires before the run's own (two
// timers set for nearly the same moment), the run still ends as the run's timeout, not as the step's failure.

const hurried = compileWorkflow({ name: 'hurried', timeoutMs: 60_000, steps: [{ name: 'wait', api: 'items', endpoint: 'slow', method: 'get' }] });

async function outcome(send: EngineDeps['api']['send']): Promise<WorkflowError> {
  const deps: EngineDeps = { api: { send }, resolve: async () => null };
  try {
    await runWorkflow(deps, hurried, {}, 'org-1');
  } catch (error) {
    if (error instanceof WorkflowError) return error;
    throw error;
  }
  throw new Error('the run did not fail');
}

t.test("a call that timed out after all the run had left is the run's timeout, naming the step", async (t) => {
  const error = await outcome(async (_envelope, options) => {
    throw API_ERRORS.upstreamTimeout('items', options!.timeoutMs!);
  });
  t.equal(error.code, 'workflow_timeout');
  t.equal(error.statusCode, 504);
  t.equal(error.step, 'wait');
  t.equal(error.message, 'step "wait": workflow "hurried" did not finish within 60000 ms');
});

t.test("a provider's own shorter timeout stays the step's: a step timeout, not the run's", async (t) => {
  const error = await outcome(async () => {
    throw API_ERRORS.upstreamTimeout('items', 5);
  });
  t.equal(error.code, 'step_timeout');
  t.equal(error.statusCode, 504);
  t.equal(error.message, 'step "wait": provider "items" did not answer within 5 ms');
});
