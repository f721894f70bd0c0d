import { hash, randomBytes, timingSafeEqual } from 'node:crypto';
import { Type, type Static } from '@sinclair/typebox';
import { Value } from '@sinclair/typebox/value';
import type { KeyDocument } from '../db/documents.js';
import type { Store } from '../db/types.js';
import { TenancyError } from './errors.js';
import { normalizeHosts } from './host.js';
import { Permissions, type Permissions as PermissionsMap } from '../schema/permissions.js';

/**
 * A key is `<key id>.<secret>`: the id (`fpk_` + 12 random bytes) is public and finds the record; the secret
 * (32 random bytes) proves possession. Both base64url, so a key is one token in a header or a JSON string.
 */
const KEY_FORMAT = /^(fpk_[A-Za-z0-9_-]{16})\.([A-Za-z0-9_-]{43})$/;
export const SECRET_BYTES = 32;

export interface ParsedKey {
  keyId: string;
  secret: string;
}

export function generateKey(): ParsedKey & { key: string } {
  const keyId = `fpk_${randomBytes(12).toString('base64url')}`;
  const secret = randomBytes(SECRET_BYTES).toString('base64url');
  return { keyId, secret, key: `${keyId}.${secret}` };
}

export function parseKey(key: string): ParsedKey | undefined {
  const match = KEY_FORMAT.exec(key);
  return match ? { keyId: match[1]!, secret: match[2]! } : undefined;
}

/**
 * SHA-256 of the secret. A slow password hash (scrypt, argon2) exists to make guessing low-entropy passwords
 * expensive; a 256-bit random secret cannot be guessed, so a fast hash loses nothing and keeps every
 * authorized request cheap, while a leaked database still yields no usable key.
 */
export function hashSecret(secret: string): string {
  return hash('sha256', secret, 'hex');
}

/** Constant-time comparison of two secrets (key-format secrets all have one length). */
export function sameSecret(a: string, b: string): boolean {
  if (a.length !== b.length) return false;
  let difference = 0;
  for (let i = 0; i < a.length; i++) difference |= a.charCodeAt(i) ^ b.charCodeAt(i);
  return difference === 0;
}

/** Constant-time comparison of a presented secret with the stored hash. */
export function secretMatches(secret: string, storedHash: Buffer): boolean {
  // One-shot hashing: no Hash object per request.
  const presented = hash('sha256', secret, 'buffer');
  return presented.length === storedHash.length && timingSafeEqual(presented, storedHash);
}

export const CreateKeyInput = Type.Object(
  {
    organizationId: Type.String({ minLength: 1, maxLength: 256 }),
    name: Type.String({ minLength: 1, maxLength: 128 }),
    admin: Type.Optional(Type.Boolean()),
    permissions: Type.Optional(Permissions),
    hosts: Type.Optional(Type.Array(Type.String({ minLength: 1, maxLength: 300 }), { maxItems: 256 })),
    expiresAt: Type.Optional(Type.String({ minLength: 1, description: 'ISO 8601 time after which the key stops working' })),
    clusterId: Type.Optional(Type.String({ minLength: 1, maxLength: 256, description: 'The cluster a server key is bound to in /manager' })),
  },
  { additionalProperties: false },
);
// `Static` cannot express the restriction objects of `Permissions`; the written-out type stands in for it.
export type CreateKeyInput = Omit<Static<typeof CreateKeyInput>, 'permissions'> & { permissions?: PermissionsMap };

export interface CreatedKey {
  organization_id: string;
  key_id: string;
  /** The only time the full key exists outside its holder: show it once, never store or log it. */
  key: string;
}

/** Checks the input; the error names the first invalid field. Nothing is written by a failed check. */
export function validateCreateKeyInput(input: unknown): CreateKeyInput & { expiresAt?: string; hosts?: string[] } {
  if (!Value.Check(CreateKeyInput, input)) {
    const error = Value.Errors(CreateKeyInput, input).First();
    const field = error?.path.replace(/^\//, '').replaceAll('/', '.') || 'input';
    throw new TenancyError(`invalid key: ${field}: ${error?.message ?? 'invalid'}`);
  }
  const hosts = input.hosts && normalizeHosts(input.hosts);
  if (input.hosts && !hosts) throw new TenancyError(`invalid key: hosts: not host names: ${input.hosts.join(', ')}`);
  let expiresAt: string | undefined;
  if (input.expiresAt !== undefined) {
    const time = /^\d{4}-\d{2}-\d{2}/.test(input.expiresAt) ? Date.parse(input.expiresAt) : Number.NaN;
    if (Number.isNaN(time)) throw new TenancyError(`invalid key: expiresAt: not an ISO 8601 time: ${input.expiresAt}`);
    expiresAt = new Date(time).toISOString();
  }
  return { ...input, ...(hosts ? { hosts } : {}), ...(expiresAt ? { expiresAt } : {}) };
}

/** Creates a key in an existing organization and returns it, once. */
export async function createKey(store: Store, input: CreateKeyInput): Promise<CreatedKey> {
  const valid = validateCreateKeyInput(input);
  const organization = await store.collection('organizations').findOne({ _id: valid.organizationId }, { projection: { _id: 1 } });
  if (!organization) throw new TenancyError(`no organization ${valid.organizationId}`);
  const generated = generateKey();
  const document: KeyDocument = {
    _id: generated.keyId,
    organization_id: valid.organizationId,
    name: valid.name,
    secretHash: hashSecret(generated.secret),
    admin: valid.admin ?? false,
    permissions: valid.permissions ?? {},
    ...(valid.hosts ? { hosts: valid.hosts } : {}),
    ...(valid.expiresAt ? { expiresAt: valid.expiresAt } : {}),
    ...(valid.clusterId ? { cluster_id: valid.clusterId } : {}),
    disabled: false,
    createdAt: new Date().toISOString(),
  };
  await store.collection('keys').insertOne(document);
  return { organization_id: valid.organizationId, key_id: generated.keyId, key: generated.key };
}

export type KeySummary = Omit<KeyDocument, 'secretHash'>;

/** An organization's keys without their hashes, oldest first. */
export async function listKeys(store: Store, organizationId: string): Promise<KeySummary[]> {
  return store.forOrganization(organizationId).collection<KeyDocument>('keys').find({}, { sort: { createdAt: 1, _id: 1 } });
}

/** Disables a key at once for every process (through the stores' change tokens); false when there is none. */
export async function revokeKey(store: Store, organizationId: string, keyId: string): Promise<boolean> {
  const result = await store.forOrganization(organizationId).collection('keys').updateOne({ _id: keyId }, { $set: { disabled: true } });
  return result.matchedCount > 0;
}
