import { Type, type Static } from '@sinclair/typebox';

export const ErrorReply = Type.Object(
  {
    error: Type.Object({
      code: Type.String({ examples: ['forbidden'] }),
      message: Type.String({ examples: ['this key may not call that method'] }),
    }),
  },
  { $id: 'ErrorReply', description: 'Every error: the HTTP status plus a stable code and a message' },
);
export type ErrorReply = Static<typeof ErrorReply>;

const probeFields = {
  status: Type.String({ examples: ['ready'], description: 'Status of the answering process' }),
  server: Type.String({ description: 'Server id' }),
  worker: Type.Integer({ minimum: 0, description: 'Worker number (0 = the primary)' }),
  version: Type.String({ examples: ['0.1.0'], description: 'Fleetplane version the answering process runs (after a hand-over, the new one)' }),
};

export const ProbeReply = Type.Object(probeFields, { $id: 'ProbeReply' });
export type ProbeReply = Static<typeof ProbeReply>;

/** A probe's answer, with what it means for the probe that gives it. */
export const probeReply = (description: string, example: ProbeReply) => Type.Object(probeFields, { description, examples: [example] });
