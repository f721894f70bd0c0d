import type { Filter, Update } from '../db/types.js';
import { isPlainObject } from '../db/validate.js';
import { isSealed } from './box.js';
import { SecretUnreadableError, SecretWriteError } from './errors.js';
import type { SecretOpener } from './keyring.js';

/**
 * Where secrets are stored, per collection (`*`: any field name): a provider's `{ "secret": ... }` header
 * values (SPEC 10.1), a webhook's verification secret (SPEC 12.1), the node credential (SPEC 14.2) and the
 * manager's key of a managed server (SPEC 13.1).
 */
const SECRET_PATHS: Readonly<Record<string, readonly string[]>> = {
  apis: ['headers', '*', 'secret'],
  webhooks: ['verify', 'secret'],
  // The node credential (SPEC 14.2): a `servers_config` record of type `key`.
  servers_config: ['key'],
  // The parent's key a managed server sends with (SPEC 13.1), kept in its own inventory record.
  servers: ['manager', 'apiKey'],
};

export const SECRET_COLLECTIONS: ReadonlySet<string> = new Set(Object.keys(SECRET_PATHS));

/** Turns one secret string, at its path in the document, into what is stored or used instead. */
export type SecretTransform = (value: string, path: string[]) => string;

export interface FoundSecret {
  path: string[];
  value: string;
}

/**
 * The value with `transform` applied to every secret under it; `rest` is what remains of the secret path below
 * `path`. Objects on the way are copied, never changed in place. `strict` refuses a secret that is not a string
 * (writes); reads skip it.
 */
function walk(value: unknown, rest: readonly string[], path: string[], transform: SecretTransform, strict: boolean): unknown {
  if (rest.length === 0) {
    if (typeof value === 'string') return transform(value, path);
    if (strict) throw new SecretWriteError(`${path.join('.')}: a secret must be a string`);
    return value;
  }
  if (!isPlainObject(value)) return value;
  const [segment, ...tail] = rest as [string, ...string[]];
  const names = segment === '*' ? Object.keys(value) : Object.hasOwn(value, segment) ? [segment] : [];
  if (names.length === 0) return value;
  const copy: Record<string, unknown> = { ...value };
  for (const name of names) copy[name] = walk(value[name], tail, [...path, name], transform, strict);
  return copy;
}

/** How a dotted field path relates to the secret path: unrelated, on the way to it (or it), or inside a secret. */
function relate(at: readonly string[], secret: readonly string[]): 'none' | 'above' | 'inside' {
  for (let i = 0; i < Math.min(at.length, secret.length); i += 1) {
    if (secret[i] !== '*' && secret[i] !== at[i]) return 'none';
  }
  return at.length <= secret.length ? 'above' : 'inside';
}

/**
 * The document with `transform` applied to each of its secrets. `strict` (writes) refuses a secret that is not
 * a string; otherwise (stored documents) it is left alone.
 */
export function transformDocument<T extends Record<string, unknown>>(collection: string, document: T, transform: SecretTransform, strict = true): T {
  const secret = SECRET_PATHS[collection];
  return secret ? (walk(document, secret, [], transform, strict) as T) : document;
}

/** Every secret string stored in a document, with its path. */
export function secretsIn(collection: string, document: Record<string, unknown>): FoundSecret[] {
  const found: FoundSecret[] = [];
  const secret = SECRET_PATHS[collection];
  if (secret) {
    walk(document, secret, [], (value, path) => {
      found.push({ path, value });
      return value;
    }, false);
  }
  return found;
}

/**
 * The update with `transform` applied to each secret it writes. `$set` of a secret, of a field holding secrets
 * (`headers`, `headers.<name>`, `verify`) or of the whole secret is transformed, `$unset` passes; any other
 * operator on those fields, or a write inside a secret string, is refused: a secret is stored as one value.
 */
export function transformUpdate(collection: string, update: Update, transform: SecretTransform): Update {
  const secret = SECRET_PATHS[collection];
  if (!secret) return update;
  const result: Update = {};
  for (const [operator, fields] of Object.entries(update)) {
    result[operator] = fields;
    if (!isPlainObject(fields)) continue;
    for (const [field, value] of Object.entries(fields)) {
      const at = field.split('.');
      const relation = relate(at, secret);
      if (relation === 'none' || operator === '$unset') continue;
      if (operator !== '$set') throw new SecretWriteError(`${operator} cannot change ${field}: ${collection} keeps secrets there; use $set or $unset`);
      if (relation === 'inside') throw new SecretWriteError(`${field}: a secret is one string; $set ${secret.slice(0, at.length - 1).join('.')} instead`);
      if (result[operator] === fields) result[operator] = { ...fields };
      result[operator]![field] = walk(value, secret.slice(at.length), at, transform, true);
    }
  }
  return result;
}

/** Whether a filter names a secret field (an upsert would copy its equality conditions into a new document). */
export function filterNamesSecrets(collection: string, filter: Filter): boolean {
  const secret = SECRET_PATHS[collection];
  if (!secret) return false;
  return Object.entries(filter).some(([key, value]) =>
    key === '$and' || key === '$or'
      ? Array.isArray(value) && value.some((clause) => isPlainObject(clause) && filterNamesSecrets(collection, clause))
      : relate(key.split('.'), secret) !== 'none',
  );
}

/**
 * A stored document with its secrets opened, for the code that uses them (provider dispatch, webhook
 * verification); never for replies or logs. Without a keyring only plaintext (stored before sealing) opens.
 */
export function revealSecrets<T extends Record<string, unknown>>(collection: string, document: T, secrets: SecretOpener | undefined): T {
  const secret = SECRET_PATHS[collection];
  if (!secret) return document;
  const organizationId = typeof document.organization_id === 'string' ? document.organization_id : '';
  return walk(document, secret, [], (value, path) => {
    if (secrets) return secrets.open(value, { organizationId, collection, path });
    if (isSealed(value)) throw new SecretUnreadableError(`${collection}.${path.join('.')} is sealed and this process has no secrets key`, 'no_keyring');
    return value;
  }, false) as T;
}
