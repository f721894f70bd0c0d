import { Type } from '@sinclair/typebox';
import { CrudEnvelope } from '../src/crud/envelope.js';

export { CrudEnvelope as CrudRequest };

export const CrudReply = Type.Object(
  {
    insertedIds: Type.Optional(Type.Array(Type.String(), { description: 'object.create' })),
    documents: Type.Optional(Type.Array(Type.Object({}, { additionalProperties: true }), { description: 'object.read; secrets shown as "[redacted]"' })),
    matchedCount: Type.Optional(Type.Integer({ description: 'object.update' })),
    modifiedCount: Type.Optional(Type.Integer({ description: 'object.update' })),
    deletedCount: Type.Optional(Type.Integer({ description: 'object.delete' })),
  },
  {
    $id: 'CrudReply',
    description: 'What the method did: the ids it inserted, the documents it read, or how many it matched, changed or deleted',
    examples: [{ documents: [{ _id: '0190c0ffee0000a1b2c3d4e5', organization_id: '0190c0ffee0000f00d', name: 'items', baseUrl: 'https://items.example.com' }] }, { matchedCount: 1, modifiedCount: 1 }],
  },
);
