import { Type, type Static } from '@sinclair/typebox';
import { HTTP_METHODS } from '../src/api/provider.js';

const Method = Type.Union(HTTP_METHODS.map((method) => Type.Literal(method)), {
  description: "The endpoint's HTTP method; also the permission checked (`post`, `get`, ...) with api/endpoint/data restrictions",
});
const Name = Type.String({ minLength: 1, maxLength: 64 });
const fields = {
  method: Method,
  data: Type.Optional(Type.Unknown({ description: 'Path parameters by name; the rest is the JSON body (query for get and head)' })),
  apikey: Type.Optional(Type.String({ description: 'Key, when not sent as Authorization: Bearer' })),
};

/** `POST /api`. There is no `url` field: a request never leaves the provider's baseUrl. */
export const ApiRequest = Type.Object(
  { api: Name, endpoint: Name, ...fields },
  {
    additionalProperties: false,
    $id: 'ApiRequest',
    examples: [{ api: 'items', endpoint: 'create', method: 'post', data: { id: '42', title: 'Item hi' } }],
  },
);
export type ApiRequest = Static<typeof ApiRequest>;

/** `POST /api/<api>[/<endpoint>]`: the path names what the body leaves out (and must agree with what it names). */
export const ApiPathRequest = Type.Object(
  { api: Type.Optional(Name), endpoint: Type.Optional(Name), ...fields },
  { additionalProperties: false, $id: 'ApiPathRequest', examples: [{ method: 'post', data: { id: '42', title: 'Item hi' } }] },
);

export const ApiPathParams = Type.Object(
  { '*': Type.String({ maxLength: 129, description: '`<api>` or `<api>/<endpoint>`', examples: ['items/create'] }) },
  { additionalProperties: false },
);

export const ApiReply = Type.Object(
  {
    status: Type.Integer({ description: "The upstream's HTTP status (4xx replies pass through here)" }),
    data: Type.Unknown({ description: "The upstream's body, JSON-parsed when it is JSON" }),
  },
  { $id: 'ApiReply', description: "The upstream's answer: its status and body", examples: [{ status: 201, data: { id: '42', title: 'Item hi' } }] },
);

/** The upstream failed (502) or did not answer in time (504): what it answered, when it answered. */
export function upstreamErrorReply(description: string, ...examples: Array<{ code: string; message: string; upstreamStatus?: number }>) {
  return Type.Object(
    {
      error: Type.Object({
        code: Type.String({ description: 'Stable, machine-readable' }),
        message: Type.String({ description: 'Names the provider' }),
        upstreamStatus: Type.Optional(Type.Integer({ description: 'What the upstream answered, when it answered' })),
      }),
    },
    { description, examples: examples.map((error) => ({ error })) },
  );
}
