/** A delivery refused before anything ran; messages never carry a secret or the expected signature. */
export class WebhookError extends Error {
  override readonly name = 'WebhookError';
  constructor(
    readonly code: 'unknown_webhook' | 'invalid_signature' | 'invalid_body' | 'missing_event' | 'webhook_unavailable',
    message: string,
    readonly statusCode: 400 | 401 | 404 | 503,
  ) {
    super(message);
  }
}
