import { FleetplaneError, SHARED_CODES, errorCode, errorEntry, type ErrorCode, type ErrorLogLine } from '../errors.js';

/**
 * A workflow that could not run or finish. `step` names the failing top-level step; the message carries the
 * whole path for nested workflows (`step "deploy" → workflow "build" → step "upload": ...`).
 */
export class WorkflowError extends FleetplaneError {
  override readonly name = 'WorkflowError';
  constructor(
    declaration: ErrorCode,
    message: string,
    readonly step?: string,
  ) {
    // A failed step or a timeout is the caller's to know: its 5xx answers name the step too.
    super(declaration.code, message, declaration.statusCode, { expose: true });
  }

  override get details(): Readonly<Record<string, unknown>> | undefined {
    return this.step ? { step: this.step } : undefined;
  }

  override get logLine(): ErrorLogLine | undefined {
    const line = super.logLine;
    return line && { ...line, fields: { step: this.step, ...line.fields, reason: this.message } };
  }

  /** The same failure seen from an enclosing step, input or output: its code and status, the message prefixed, `step` named. */
  within(prefix: string, step: string | undefined): WorkflowError {
    // The error is its own declaration: its code and status.
    return new WorkflowError(this, `${prefix}${this.message}`, step);
  }

  /** The failure of the step `name`; a nested one reads `step "outer" → step "inner": ...`. */
  atStep(name: string): WorkflowError {
    return this.within(`step "${name}"${this.step ? ' → ' : ': '}`, name);
  }
}

const entry = <Args extends unknown[]>(declaration: ErrorCode, message: (...args: Args) => string) =>
  errorEntry(declaration, (declared, ...args: Args) => new WorkflowError(declared, message(...args)));

/** Every error of a workflow run, declared once with its status (SPEC 11). */
export const WORKFLOW_ERRORS = {
  invalidRequest: entry(SHARED_CODES.invalidRequest, (reason: string) => reason),
  methodMismatch: entry(SHARED_CODES.methodMismatch, (method: string, given: string) => `method: this route runs "${method}", not "${given}"`),
  /** A tenant's IPC step naming a server-level method or target (SPEC 8.4); the reason says which. */
  platformOnly: entry(SHARED_CODES.platformOnly, (reason: string) => reason),
  unknownWorkflow: entry(errorCode('unknown_workflow', 404), (name: string) => `no workflow "${name}"`),
  invalidWorkflow: entry(errorCode('invalid_workflow', 422), (name: string, reason: string) => `workflow "${name}" is not valid: ${reason}`),
  /** The run's input lacks a value the workflow reads: the caller's to fix. */
  missingReference: entry(errorCode('missing_reference', 400), (reference: string) => `\${${reference}} has no value`),
  /** An earlier step's result lacks a value a later step reads: the definition expects what the step does not give. */
  missingStepValue: entry(errorCode('missing_step_value', 422), (reference: string) => `\${${reference}} has no value`),
  /** The step's provider or target failed, answered an error, or nothing answered. */
  stepFailed: entry(errorCode('step_failed', 502), (reason: string) => reason),
  /** The step was refused as the definition wrote it: an unknown api, endpoint or workflow, a call that does not fit. */
  stepRefused: entry(errorCode('step_refused', 422), (reason: string) => reason),
  /** The step's provider did not answer within its own timeout, shorter than what was left of the run. */
  stepTimeout: entry(errorCode('step_timeout', 504), (reason: string) => reason),
  depthExceeded: entry(errorCode('depth_exceeded', 422), (depth: number) => `workflows nest deeper than ${depth} levels`),
  stepLimit: entry(errorCode('step_limit', 422), (steps: number) => `a run may take at most ${steps} steps`),
  workflowTimeout: entry(errorCode('workflow_timeout', 504), (name: string, timeoutMs: number) => `workflow "${name}" did not finish within ${timeoutMs} ms`),
  unavailable: entry(SHARED_CODES.unavailable, (what: string) => what),
};

/** What every surface that runs workflows answers on a server without them. */
export const workflowsUnavailable = () => WORKFLOW_ERRORS.unavailable('workflows are not available on this server');

/** A definition that cannot be compiled: the resource file, the CRUD write or the `register` call is at fault. */
export class WorkflowDefinitionError extends Error {
  override readonly name = 'WorkflowDefinitionError';
}
