import { ApiService } from '../api/service.js';
import type { Store } from '../db/types.js';
import type { RequestResult } from '../ipc/handlers.js';
import type { Logger } from '../logging/logger.js';
import type { SecretOpener } from '../secrets/keyring.js';
import { WebhookService } from '../webhooks/service.js';
import { WorkflowService } from './service.js';

/** `server.api`, `server.workflow`, `server.webhooks` (SPEC 10–12). */
export interface Automation {
  api: ApiService;
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
}

export function openAutomation(host: AutomationHost): Automation {
  const api = new ApiService(host.db, host.log.child({ component: 'api' }), host.secrets);
  const workflow = new WorkflowService({
    store: host.db,
    api,
    request: (envelope, options) => host.request(envelope, options),
    isPlatform: async (organizationId) => (await host.authorize?.directory.platformOrganization()) === organizationId,
  });
  const webhooks = new WebhookService({ store: host.db, workflow, log: host.log.child({ component: 'webhooks' }), secrets: host.secrets });
  // SPEC 5.5: everything held for an inactive organization is released: pools, compiled definitions.
  host.on?.('organization.inactive', ({ organization_id }) => {
    api.organizationInactive(organization_id);
    workflow.organizationInactive(organization_id);
    webhooks.organizationInactive(organization_id);
  });
  return { api, workflow, webhooks };
}
