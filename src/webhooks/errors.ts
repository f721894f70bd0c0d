import { FleetplaneError, errorCode, errorEntry, type ErrorCode, type ErrorLogLine } from '../errors.js';

/** A delivery refused before anything ran; messages never carry a secret or the expected signature. */
export class WebhookError extends FleetplaneError {
  override readonly name = 'WebhookError';
  constructor(declaration: ErrorCode, message: string) {
    super(declaration.code, message, declaration.statusCode, { expose: true });
  }

  /**
   * A refused signature is worth a line (someone holds the URL without the secret); the other refusals are the
   * sender's to read in its answer.
   */
  override get logLine(): ErrorLogLine | undefined {
    return this.code === WEBHOOK_ERRORS.invalidSignature.code ? { level: 'info', fields: {}, message: 'webhook signature refused' } : undefined;
  }
}

const entry = <Args extends unknown[]>(declaration: ErrorCode, message: (...args: Args) => string) =>
  errorEntry(declaration, (declared, ...args: Args) => new WebhookError(declared, message(...args)));

/** Every refusal of a webhook delivery (SPEC 12), declared once with its status. */
export const WEBHOOK_ERRORS = {
  /** An unknown name, or a host that serves no organization: nothing tells a sender which tenants exist. */
  unknownWebhook: entry(errorCode('unknown_webhook', 404), (name: string) => `no webhook "${name}"`),
  invalidSignature: entry(errorCode('invalid_signature', 401), (name: string) => `the delivery is not signed with the secret of webhook "${name}"`),
  invalidBody: entry(errorCode('invalid_body', 400), (reason: string) => `the body is not valid JSON: ${reason}`),
  missingEvent: entry(errorCode('missing_event', 400), (source: string) => `the event name (${source}) is missing`),
  /** No webhooks on this server, or a definition that cannot be used here. */
  webhookUnavailable: entry(errorCode('webhook_unavailable', 503), (reason: string) => reason),
};

/** What a server without webhooks answers. */
export const webhooksUnavailable = () => WEBHOOK_ERRORS.webhookUnavailable('webhooks are not available on this server');
