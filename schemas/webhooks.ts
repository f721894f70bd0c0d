import { Type } from '@sinclair/typebox';

export const WebhookParams = Type.Object(
  { '*': Type.String({ maxLength: 256, description: 'The webhook name', examples: ['github'] }) },
  { additionalProperties: false },
);

/** The sender's payload is free-form JSON: it is verified on its raw bytes, then becomes the workflow's input. */
export const WebhookPayload = Type.Unknown({ description: "The sender's JSON payload, signed over its raw bytes", examples: [{ ref: 'refs/heads/main' }] });

export const WebhookReply = Type.Object(
  {
    accepted: Type.Boolean({ description: 'true: the workflow runs after this reply; false: no workflow for this event' }),
    event: Type.String({ examples: ['push'] }),
    workflow: Type.Union([Type.String(), Type.Null()], { examples: ['make-item'] }),
  },
  { $id: 'WebhookReply', description: 'The delivery was verified; whether its event starts a workflow', examples: [{ accepted: true, event: 'push', workflow: 'make-item' }] },
);
