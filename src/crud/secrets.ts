import { SERVERS } from '../inventory/records.js';
import { CRUD_ERRORS } from './errors.js';

export const REDACTED = '[redacted]';

const isRecord = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value);
const touches = (path: string, field: string) => path === field || path.startsWith(`${field}.`) || field.startsWith(`${path}.`);

/**
 * Fields holding secrets, per collection: never returned by reads and never usable in a filter or sort,
 * where comparisons would leak them a bit at a time. (`keys.secretHash` is hidden by the store's scope.)
 */
const SECRET_FIELDS: Readonly<Record<string, readonly string[]>> = {
  apis: ['headers'],
  webhooks: ['verify.secret'],
  servers_config: ['key'],
  servers: ['manager.apiKey'],
};

function paths(filter: Record<string, unknown>): string[] {
  return Object.entries(filter).flatMap(([key, value]) =>
    key === '$and' || key === '$or' ? (Array.isArray(value) ? value.flatMap((clause) => (isRecord(clause) ? paths(clause) : [])) : []) : [key],
  );
}

/** Refuses filters and sorts that read a secret field. */
export function assertNoSecretPaths(collection: string, filter: Record<string, unknown> | undefined, sort?: Record<string, unknown>): void {
  const secret = SECRET_FIELDS[collection];
  if (!secret) return;
  for (const path of [...paths(filter ?? {}), ...Object.keys(sort ?? {})]) {
    const field = secret.find((candidate) => touches(path, candidate));
    if (field) throw CRUD_ERRORS.secretField(path, `${collection}.${field}`);
  }
}

/** A provider's header secrets, a webhook's verification secret, a node credential and a manager key, shown as `[redacted]`. */
export function redactSecrets<T extends Record<string, unknown>>(collection: string, document: T): T {
  if (collection === 'apis' && isRecord(document.headers)) {
    const headers = Object.fromEntries(Object.entries(document.headers).map(([name, value]) => [name, isRecord(value) && 'secret' in value ? { secret: REDACTED } : value]));
    return { ...document, headers };
  }
  if (collection === 'webhooks' && isRecord(document.verify) && 'secret' in document.verify) {
    return { ...document, verify: { ...document.verify, secret: REDACTED } };
  }
  if (collection === 'servers_config' && typeof document.key === 'string') return { ...document, key: REDACTED };
  if (collection === SERVERS && isRecord(document.manager) && 'apiKey' in document.manager) return { ...document, manager: { ...document.manager, apiKey: REDACTED } };
  return document;
}
