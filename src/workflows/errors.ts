import { FleetplaneError } from '../errors.js';

/**
 * A workflow that could not run or finish. `step` names the failing top-level step; the message carries the
 * whole path for nested workflows (`step "deploy" → workflow "build" → step "upload": ...`).
 */
export class WorkflowError extends FleetplaneError {
  override readonly name = 'WorkflowError';
  declare readonly code: WorkflowErrorCode;
  declare readonly statusCode: 400 | 403 | 404 | 422 | 502 | 503 | 504;
  constructor(
    code: WorkflowErrorCode,
    message: string,
    statusCode: 400 | 403 | 404 | 422 | 502 | 503 | 504,
    readonly step?: string,
  ) {
    // A failed step or a timeout is the caller's to know: its 5xx answers name the step too.
    super(code, message, statusCode, { expose: true });
  }

  override get details(): Readonly<Record<string, unknown>> | undefined {
    return this.step ? { step: this.step } : undefined;
  }
}

export type WorkflowErrorCode =
  | 'invalid_request'
  | 'platform_only'
  | 'unknown_workflow'
  | 'invalid_workflow'
  | 'missing_reference'
  | 'step_failed'
  | 'depth_exceeded'
  | 'step_limit'
  | 'workflow_timeout'
  | 'unavailable';

/** A definition that cannot be compiled: the resource file, the CRUD write or the `register` call is at fault. */
export class WorkflowDefinitionError extends Error {
  override readonly name = 'WorkflowDefinitionError';
}
