/**
 * A workflow that could not run or finish. `step` names the failing top-level step; the message carries the
 * whole path for nested workflows (`step "deploy" → workflow "build" → step "upload": ...`).
 */
export class WorkflowError extends Error {
  override readonly name = 'WorkflowError';
  constructor(
    readonly code: WorkflowErrorCode,
    message: string,
    readonly statusCode: 400 | 403 | 404 | 422 | 502 | 503 | 504,
    readonly step?: string,
  ) {
    super(message);
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
