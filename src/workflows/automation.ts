import { ApiService, type ApiCallOptions, type ApiReply } from '../api/service.js';
import { withBuiltinProviders, type BuiltinProvider } from '../manager/builtin-providers.js';
import type { Store } from '../db/types.js';
import type { RequestResult } from '../ipc/handlers.js';
import type { Logger } from '../logging/logger.js';
import type { SecretOpener } from '../secrets/keyring.js';
import { WebhookService } from '../webhooks/service.js';
import { WorkflowService } from './service.js';

/** `server.api`, `server.workflow`, `server.webhooks` (SPEC 10–12). */
export interface Automation {
  api: ApiService;
  /** `api.send` with the built-in providers (SPEC 13.4) in front: what workflows and the manager call. */
  providers: (envelope: unknown, options?: ApiCallOptions) => Promise<ApiReply>;
  workflow: WorkflowService;
  webhooks: WebhookService;
}

/** What the services need from the server object; read when used, since IPC is attached after them. */
export interface AutomationHost {
  db: Store | undefined;
  log: Logger;
  /** Opens provider and webhook secrets sealed at rest. */
  secrets?: SecretOpener;
  request(envelope: unknown, options?: { timeoutMs?: number }): Promise<RequestResult>;
  on?(event: 'organization.inactive', listener: (payload: { organization_id: string }) => void): unknown;
  /** Where the platform organization is known (SPEC 8.4). */
  authorize?: { directory: { platformOrganization(): Promise<string | null> } };
  /** Providers answered in this process for the platform organization (`local`). */
  builtinProviders?: Readonly<Record<string, BuiltinProvider>>;
}

export function openAutomation(host: AutomationHost): Automation {
  const api = new ApiService(host.db, host.log.child({ component: 'api' }), host.secrets);
  const isPlatform = async (organizationId: string) => (await host.authorize?.directory.platformOrganization()) === organizationId;
  const send = (envelope: unknown, options?: ApiCallOptions) => api.send(envelope, options);
  const providers = host.builtinProviders ? withBuiltinProviders(send, host.builtinProviders, isPlatform) : send;
  const workflow = new WorkflowService({ store: host.db, api: { send: providers }, request: (envelope, options) => host.request(envelope, options), isPlatform });
  const webhooks = new WebhookService({ store: host.db, workflow, log: host.log.child({ component: 'webhooks' }), secrets: host.secrets });
  // SPEC 5.5: everything held for an inactive organization is released: pools, compiled definitions.
  host.on?.('organization.inactive', ({ organization_id }) => {
    api.organizationInactive(organization_id);
    workflow.organizationInactive(organization_id);
    webhooks.organizationInactive(organization_id);
  });
  return { api, providers, workflow, webhooks };
}
