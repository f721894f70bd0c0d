import { Type } from '@sinclair/typebox';

export const MAX_INPUTS_PER_REQUEST = 100;
const Inputs = Type.Array(Type.Unknown(), { maxItems: MAX_INPUTS_PER_REQUEST, description: 'One run per input' });

export const WorkflowParams = Type.Object(
  { name: Type.String({ pattern: '^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$', description: 'Workflow name', examples: ['make-item'] }) },
  { additionalProperties: false },
);

/** `POST /workflows/<name>`: `{ "<name>": [input, ...] }`. */
export const WorkflowRequest = Type.Object(
  {
    method: Type.Optional(Type.String({ description: 'Set by the route to "workflow.<name>"; any other value is refused' })),
    name: Type.Optional(Type.String({ description: 'Set by the route to the workflow name, for "name" restrictions' })),
    apikey: Type.Optional(Type.String({ description: 'Key, when not sent as Authorization: Bearer' })),
  },
  {
    additionalProperties: Inputs,
    $id: 'WorkflowRequest',
    description: 'One field named like the workflow, holding its inputs',
    examples: [{ 'make-item': [{ id: '42', title: 'hi' }] }],
  },
);

export const WorkflowReply = Type.Object(
  {},
  {
    additionalProperties: Type.Array(Type.Unknown()),
    $id: 'WorkflowReply',
    description: 'The results, in the order of the inputs, under the workflow name',
    examples: [{ 'make-item': [{ created: { id: '42', title: 'Item hi' } }] }],
  },
);

/** A refused or failed run; when a step failed, the message and `step` name it. */
export function workflowErrorReply(description: string, ...examples: Array<{ code: string; message: string; step?: string }>) {
  return Type.Object(
    {
      error: Type.Object({
        code: Type.String({ description: 'Stable, machine-readable' }),
        message: Type.String({ description: 'Names the failing step, when one failed' }),
        step: Type.Optional(Type.String({ description: 'The failing step' })),
      }),
    },
    { description, examples: examples.map((error) => ({ error })) },
  );
}
