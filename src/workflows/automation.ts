import { EgressPolicy } from '../api/egress.js';
import { ApiService, type ApiCallOptions, type ApiReply } from '../api/service.js';
import type { ResolvedConfig } from '../config/schema.js';
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
export interface AutomationDeps {
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
  /** Where providers may connect (SPEC 10.4); the configuration's defaults when absent. */
  egress?: ResolvedConfig['egress'];
}

export function openAutomation(deps: AutomationDeps): Automation {
  const isPlatform = async (organizationId: string) => (await deps.authorize?.directory.platformOrganization()) === organizationId;
  const { allow, platform } = deps.egress ?? { allow: [], platform: 'unrestricted' };
  const api = new ApiService(deps.db, deps.log.child({ component: 'api' }), deps.secrets, {
    policy: new EgressPolicy({ allow }),
    exempt: (organizationId) => platform === 'unrestricted' && isPlatform(organizationId),
  });
  const send = (envelope: unknown, options?: ApiCallOptions) => api.send(envelope, options);
  const providers = deps.builtinProviders ? withBuiltinProviders(send, deps.builtinProviders, isPlatform) : send;
  const workflow = new WorkflowService({ store: deps.db, api: { send: providers }, request: (envelope, options) => deps.request(envelope, options), isPlatform });
  const webhooks = new WebhookService({ store: deps.db, workflow, log: deps.log.child({ component: 'webhooks' }), secrets: deps.secrets });
  // SPEC 5.5: everything held for an inactive organization is released: pools, compiled definitions.
  deps.on?.('organization.inactive', ({ organization_id }) => {
    api.organizationInactive(organization_id);
    workflow.organizationInactive(organization_id);
    webhooks.organizationInactive(organization_id);
  });
  return { api, providers, workflow, webhooks };
}
