import type { ApiCallOptions, ApiReply } from '../api/service.js';
import { MANAGER_ERRORS } from './errors.js';

/** What the manager asks of a provider: a cloud (the provider API's name) and the request's data. */
export interface ProviderRequest {
  /** The platform organization: provider requests run in its scope, with its providers and workflows. */
  organization_id: string;
  cloud: string;
  data: Record<string, unknown>;
}

export interface ProviderPort {
  /** Resolves with the provider's answer, which must carry `instanceId`. */
  create(request: ProviderRequest): Promise<unknown>;
  terminate(request: ProviderRequest): Promise<unknown>;
}

/** `server.api.send` (SPEC 10.3), or the same with built-in providers in front of it. */
export type ApiSend = (envelope: unknown, options?: ApiCallOptions) => Promise<ApiReply>;

/** The part of `server.workflow` the manager uses. */
export interface WorkflowRunner {
  resolve(organizationId: string, name: string): Promise<unknown>;
  run(name: string, input: unknown, context: { organization_id: string }): Promise<unknown>;
}

export interface ProviderPortOptions {
  api: ApiSend;
  workflows?: WorkflowRunner;
  createWorkflow: string;
  terminateWorkflow: string;
}

/**
 * SPEC 13.4: a provider request runs the platform organization's provider workflow for that cloud
 * (`create-organization-server-<cloud>`, else `create-organization-server`; `terminate-...` alike) with
 * `{ cloud, ...data }` as its input; without one it goes straight to the provider API named by `cloud`,
 * endpoint `create` or `terminate` (post).
 * Either way it takes the `/api` path (SPEC 10), so it can only reach what the platform configured.
 */
export function providerPort(options: ProviderPortOptions): ProviderPort {
  const call = async (action: 'create' | 'terminate', request: ProviderRequest): Promise<unknown> => {
    const base = action === 'create' ? options.createWorkflow : options.terminateWorkflow;
    for (const workflow of [`${base}-${request.cloud}`, base]) {
      if (options.workflows && (await options.workflows.resolve(request.organization_id, workflow))) {
        return options.workflows.run(workflow, { cloud: request.cloud, ...request.data }, { organization_id: request.organization_id });
      }
    }
    const reply = await options.api({ organization_id: request.organization_id, api: request.cloud, endpoint: action, method: 'post', data: request.data });
    if (reply.status >= 400) throw MANAGER_ERRORS.providerFailed(`provider "${request.cloud}" answered ${reply.status} to ${action}${reasonOf(reply.data)}`);
    return reply.data;
  };
  return { create: (request) => call('create', request), terminate: (request) => call('terminate', request) };
}

/** The provider's own words for a refusal (`error`, `error.message` or `message` of its answer), bounded; or nothing. */
function reasonOf(data: unknown): string {
  const body = data as { error?: unknown; message?: unknown } | null | undefined;
  const error = body?.error as { message?: unknown } | string | undefined;
  const reason = typeof error === 'string' ? error : typeof error?.message === 'string' ? error.message : typeof body?.message === 'string' ? body.message : undefined;
  if (!reason) return '';
  const line = reason.replace(/\s+/g, ' ').trim();
  return line ? `: ${line.length > 300 ? `${line.slice(0, 300)}…` : line}` : '';
}
