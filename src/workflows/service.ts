import { DefinitionCache } from '../api/definition-cache.js';
import type { Store } from '../db/types.js';
import { compileWorkflow, type CompiledWorkflow } from './definition.js';
import { runWorkflow, type EngineDeps } from './engine.js';
import { WORKFLOW_ERRORS, WorkflowDefinitionError, WorkflowError } from './errors.js';

export interface WorkflowServiceDeps extends Pick<EngineDeps, 'api' | 'request' | 'isPlatform'> {
  store: Store | undefined;
}

/** A stored definition the tenant broke (through CRUD): refused when called, naming the field. */
function compileStored(document: Record<string, unknown>): CompiledWorkflow {
  const { _id, organization_id, createdAt, updatedAt, ...definition } = document;
  try {
    return compileWorkflow(definition);
  } catch (error) {
    if (error instanceof WorkflowDefinitionError) throw WORKFLOW_ERRORS.invalidWorkflow(String(document.name), error.message);
    throw error;
  }
}

/**
 * `server.workflow` (SPEC 11): workflows of each organization (collection `workflows`) and those registered in
 * code, which every organization may call. An organization's own definition of a name wins over the code one.
 */
export class WorkflowService {
  private readonly registered = new Map<string, CompiledWorkflow>();
  private readonly stored: DefinitionCache<CompiledWorkflow> | undefined;
  private readonly engine: EngineDeps;

  constructor(deps: WorkflowServiceDeps) {
    this.stored = deps.store && new DefinitionCache(deps.store, 'workflows', compileStored);
    this.engine = { api: deps.api, request: deps.request, isPlatform: deps.isPlatform, resolve: (organizationId, name) => this.resolve(organizationId, name) };
  }

  /** Registers (or replaces) a workflow in code; throws `WorkflowDefinitionError` naming the invalid field. */
  register(name: string, definition: Record<string, unknown>): void {
    const compiled = compileWorkflow({ ...definition, name });
    this.registered.set(name, { ...compiled, trusted: true });
  }

  /** SPEC 5.5: an inactive organization's compiled workflows are released. */
  organizationInactive(organizationId: string): void {
    this.stored?.forget(organizationId);
  }

  /** The workflow an organization reaches by this name, or null. */
  async resolve(organizationId: string, name: string): Promise<CompiledWorkflow | null> {
    const cached = this.cached(organizationId, name);
    return cached !== undefined ? cached : ((await this.stored!.get(organizationId, name)) ?? this.registered.get(name) ?? null);
  }

  /** What `resolve` answers when it needs no store read (undefined when it does). */
  private cached(organizationId: string, name: string): CompiledWorkflow | null | undefined {
    const stored = this.stored?.peek(organizationId, name);
    if (stored === undefined && this.stored) return undefined;
    return stored ?? this.registered.get(name) ?? null;
  }

  /** Runs the workflow once for `input`; failures are `WorkflowError`s naming the step. */
  async run(name: string, input: unknown, context: { organization_id: string }): Promise<unknown> {
    const workflow = await this.resolve(context.organization_id, name);
    if (!workflow) throw WORKFLOW_ERRORS.unknownWorkflow(name);
    return runWorkflow(this.engine, workflow, input, context.organization_id);
  }

  /**
   * SPEC 11.1: one run per input, in order; the first failure stops the rest (later inputs may depend on
   * earlier effects) and names the input when there are several.
   */
  async runEach(name: string, inputs: readonly unknown[], context: { organization_id: string }): Promise<unknown[]> {
    // A definition compiled a moment ago needs no promise.
    const cached = this.cached(context.organization_id, name);
    const workflow = cached !== undefined ? cached : await this.resolve(context.organization_id, name);
    if (!workflow) throw WORKFLOW_ERRORS.unknownWorkflow(name);
    const results: unknown[] = [];
    for (const [index, input] of inputs.entries()) {
      try {
        // A run that answers at once (a workflow without steps) is not waited for: no promise per input.
        const result = runWorkflow(this.engine, workflow, input, context.organization_id);
        results.push(result instanceof Promise ? await result : result);
      } catch (error) {
        if (error instanceof WorkflowError && inputs.length > 1) throw error.within(`input ${index}: `, error.step);
        throw error;
      }
    }
    return results;
  }

  close(): void {
    this.stored?.close();
  }
}
