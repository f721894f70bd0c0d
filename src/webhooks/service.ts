import { DefinitionCache } from '../api/definition-cache.js';
import { parseUntrustedJson } from '../api/untrusted-json.js';
import type { Store } from '../db/types.js';
import { SecretKeyError, SecretUnreadableError } from '../secrets/errors.js';
import { revealSecrets } from '../secrets/fields.js';
import type { SecretOpener } from '../secrets/keyring.js';
import { webhookViolation, type WebhookDefinition } from './definition.js';
import { WEBHOOK_ERRORS, WebhookError, webhooksUnavailable } from './errors.js';
import { verifyDelivery } from './verify.js';

export interface WebhookDelivery {
  organization_id: string;
  /** The webhook's path name: `/webhooks/<name>`. */
  name: string;
  headers: Readonly<Record<string, string | string[] | undefined>>;
  /** The body exactly as received: signatures are over these bytes. */
  rawBody: Buffer;
}

export type WebhookOutcome =
  | { accepted: true; event: string; workflow: string; run: () => Promise<unknown> }
  | { accepted: false; event: string; workflow: null };

export interface WebhookServiceDeps {
  store: Store | undefined;
  workflow: { run(name: string, input: unknown, context: { organization_id: string }): Promise<unknown> };
  log?: { error(details: Record<string, unknown>, message: string): void };
  /** Opens the stored verification secret (without it, only one stored in plain text works). */
  secrets?: SecretOpener;
}

const ANY_EVENT = '*';

function fieldAt(body: unknown, path: string): unknown {
  let node = body;
  for (const segment of path.split('.')) {
    if (typeof node !== 'object' || node === null || Array.isArray(node) || !Object.hasOwn(node, segment)) return undefined;
    node = (node as Record<string, unknown>)[segment];
  }
  return node;
}

/**
 * `server.webhooks` (SPEC 12): per-organization definitions (collection `webhooks`). A delivery is verified on
 * its raw bytes first; only then is it parsed, its event named and mapped to a workflow, which the caller runs
 * after answering the sender.
 */
export class WebhookService {
  private readonly definitions: DefinitionCache<WebhookDefinition> | undefined;

  constructor(private readonly deps: WebhookServiceDeps) {
    this.definitions =
      deps.store &&
      new DefinitionCache(deps.store, 'webhooks', (document) => {
        const { _id, organization_id, createdAt, updatedAt, ...definition } = this.withOpenSecret(document);
        const violation = webhookViolation(definition);
        if (violation) throw WEBHOOK_ERRORS.webhookUnavailable(`webhook "${String(document.name)}" is not valid: ${violation}`);
        return definition as WebhookDefinition;
      });
  }

  async receive(delivery: WebhookDelivery): Promise<WebhookOutcome> {
    const definition = await this.definition(delivery);
    if (!verifyDelivery(definition.verify, delivery.headers, delivery.rawBody)) {
      throw WEBHOOK_ERRORS.invalidSignature(delivery.name);
    }
    let body: unknown;
    try {
      body = parseUntrustedJson(delivery.rawBody.toString('utf8'));
    } catch (error) {
      throw WEBHOOK_ERRORS.invalidBody((error as Error).message);
    }
    const event = this.eventOf(definition, delivery.headers, body);
    const workflow = Object.hasOwn(definition.workflows, event) ? definition.workflows[event] : definition.workflows[ANY_EVENT];
    if (!workflow) return { accepted: false, event, workflow: null };
    const context = { organization_id: delivery.organization_id };
    return { accepted: true, event, workflow, run: () => this.deps.workflow.run(workflow, body, context) };
  }

  /** SPEC 5.5: an inactive organization's compiled webhook definitions are released. */
  organizationInactive(organizationId: string): void {
    this.definitions?.forget(organizationId);
  }

  close(): void {
    this.definitions?.close();
  }

  /** The stored webhook with its secret opened; one that does not open makes the webhook unusable (503, logged). */
  private withOpenSecret(document: Record<string, unknown>): Record<string, unknown> {
    try {
      return revealSecrets('webhooks', document, this.deps.secrets);
    } catch (error) {
      if (!(error instanceof SecretUnreadableError) && !(error instanceof SecretKeyError)) throw error;
      throw WEBHOOK_ERRORS.webhookUnavailable(`webhook "${String(document.name)}" is not usable: ${error.message}`);
    }
  }

  private async definition(delivery: WebhookDelivery): Promise<WebhookDefinition> {
    if (!this.definitions) throw webhooksUnavailable();
    try {
      const definition = await this.definitions.get(delivery.organization_id, delivery.name);
      if (!definition) throw WEBHOOK_ERRORS.unknownWebhook(delivery.name);
      return definition;
    } catch (error) {
      // The sender is not the tenant: it learns that the webhook is unusable, the log says why.
      if (error instanceof WebhookError && error.code === 'webhook_unavailable') {
        this.deps.log?.error({ webhook: delivery.name, organization: delivery.organization_id, reason: error.message }, 'webhook definition is invalid');
        throw WEBHOOK_ERRORS.webhookUnavailable(`webhook "${delivery.name}" is misconfigured`);
      }
      throw error;
    }
  }

  private eventOf(definition: WebhookDefinition, headers: WebhookDelivery['headers'], body: unknown): string {
    if (!definition.event) return ANY_EVENT;
    const value = definition.event.header !== undefined ? headers[definition.event.header.toLowerCase()] : fieldAt(body, definition.event.field!);
    if (typeof value !== 'string' || value.length === 0 || value.length > 128) {
      const source = definition.event.header !== undefined ? `header ${definition.event.header}` : `field ${definition.event.field}`;
      throw WEBHOOK_ERRORS.missingEvent(source);
    }
    return value;
  }
}
