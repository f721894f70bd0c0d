import { FleetplaneError } from '../errors.js';

/** A delivery refused before anything ran; messages never carry a secret or the expected signature. */
export class WebhookError extends FleetplaneError {
  override readonly name = 'WebhookError';
  declare readonly code: 'unknown_webhook' | 'invalid_signature' | 'invalid_body' | 'missing_event' | 'webhook_unavailable';
  declare readonly statusCode: 400 | 401 | 404 | 503;
  constructor(code: WebhookError['code'], message: string, statusCode: 400 | 401 | 404 | 503) {
    super(code, message, statusCode, { expose: true });
  }
}
