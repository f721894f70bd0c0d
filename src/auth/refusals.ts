import type { KnownKey } from './directory.js';
import { AUTH_ERRORS, type AuthorizationError } from './errors.js';
import { sameSecret, secretMatches } from './keys.js';

const BEARER = /^Bearer ([^\s]+)$/i;

/** Hashed when the key id or the host is unknown, so a miss costs what a wrong secret costs. */
export const UNKNOWN_KEY_HASH = Buffer.alloc(32);

/**
 * The refusals that say something about who the caller is: those SPEC 8.7 makes uniform, and those only a
 * key's holder hears. They are answered at the same time after their request arrived, whatever was looked up.
 */
export const IDENTITY_REFUSALS: ReadonlySet<string> = new Set(['forbidden', 'malformed_authorization', 'malformed_key', 'conflicting_keys', 'key_revoked', 'key_expired', 'too_many_requests']);

/**
 * SPEC 8.7: the one answer for an unknown host, an unknown key, a wrong secret, another organization's key, a key
 * used on a host outside its list, and a request without a key that its host does not allow: telling them apart
 * would tell a caller which hosts and keys exist.
 */
export const refused = (): AuthorizationError => AUTH_ERRORS.forbidden();
/** SPEC 8.7: whatever failed, the same answer once an address is past its failed-authentication limit. */
export const tooManyFailures = (retryAfterMs: number) => AUTH_ERRORS.tooManyRequests(Math.max(1, Math.ceil(retryAfterMs / 1000)));

/** The key from `Authorization: Bearer` or the envelope's `apikey`; both present and different is refused. */
export function presentedKey(header: string | string[] | undefined, apikey: unknown): string | undefined {
  let fromHeader: string | undefined;
  if (header !== undefined) {
    const match = typeof header === 'string' ? BEARER.exec(header.trim()) : null;
    if (!match) throw AUTH_ERRORS.malformedAuthorization();
    fromHeader = match[1];
  }
  const fromEnvelope = apikey === null || apikey === undefined ? undefined : apikey;
  if (fromEnvelope !== undefined && (typeof fromEnvelope !== 'string' || fromEnvelope === '')) throw AUTH_ERRORS.malformedKey('apikey must be a key string');
  if (fromHeader !== undefined && fromEnvelope !== undefined && fromHeader !== fromEnvelope) {
    throw AUTH_ERRORS.conflictingKeys();
  }
  return fromHeader ?? fromEnvelope;
}

/**
 * The presented secret against the key's record: the secret that last matched this cached record is compared
 * directly (constant time), any other one is hashed, as is a secret for an unknown key id, so a miss costs what
 * a wrong secret costs.
 */
export function checkKey(secret: string, known: KnownKey | null, organizationId: string, host: string): KnownKey {
  const matches = known?.verifiedSecret !== undefined && sameSecret(secret, known.verifiedSecret) ? true : secretMatches(secret, known?.hash ?? UNKNOWN_KEY_HASH);
  if (!known || !matches) throw refused();
  known.verifiedSecret = secret;
  const refusal = keyRefusal(known, organizationId, host);
  if (refusal) throw refusal;
  return known;
}

/**
 * Why a key whose secret matched may not be used for this organization on this host, or `undefined` when it may:
 * the one rule `checkKey` and the cached path both apply. Another organization's key and a host outside the
 * key's list are the uniform refusal; only the key's own holder learns that it was revoked or expired.
 */
export function keyRefusal(known: KnownKey, organizationId: string, host: string, nowMs = Date.now()): AuthorizationError | undefined {
  if (known.record.organization_id !== organizationId) return refused();
  if (known.hosts && !known.hosts.has(host)) return refused();
  if (known.record.disabled) return AUTH_ERRORS.keyRevoked();
  if (known.expiresAtMs !== undefined && known.expiresAtMs <= nowMs) return AUTH_ERRORS.keyExpired();
  return undefined;
}
