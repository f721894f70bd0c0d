import type { Store } from '../db/types.js';
import { TenantDirectory, type DirectoryOptions, type KnownKey } from './directory.js';
import { EnvelopeTooDeepError, envelopeCheck, sanitizeEnvelope, type AuthorizedEnvelope, type AuthorizedUser, type Envelope, type SocketIdentity } from './envelope.js';
import { AuthorizationError } from './errors.js';
import { normalizeHost } from './host.js';
import { parseKey, sameSecret, secretMatches } from './keys.js';
import { isPermitted } from './permissions.js';
import { tenantViolation } from './authority.js';

/** The transport facts authorization needs; framework-free so HTTP routes and the WebSocket share it. */
export interface AuthorizationRequest {
  /** The `Host` header (or `:authority`), port included or not. */
  host: string | undefined;
  headers: Readonly<Record<string, string | string[] | undefined>>;
  socket?: { remoteAddress?: string; remotePort?: number; encrypted?: boolean };
}

/** Where denials are reported; never receives a key. */
export interface AuthorizationLog {
  info(details: Record<string, unknown>, message: string): void;
}

export interface AuthorizerOptions extends DirectoryOptions {
  log?: AuthorizationLog;
}

const BEARER = /^Bearer ([^\s]+)$/i;
/** Hashed when the key id or the host is unknown, so a miss costs what a wrong secret costs. */
const UNKNOWN_KEY_HASH = Buffer.alloc(32);

const deny = (code: string, message: string, statusCode: 400 | 403 = 403) => new AuthorizationError(code, message, statusCode);
/**
 * SPEC 8.7: the one answer for an unknown host, an unknown key, a wrong secret, another organization's key, a key
 * used on a host outside its list, and a request without a key that its host does not allow: telling them apart
 * would tell a caller which hosts and keys exist.
 */
export const refused = () => deny('forbidden', 'this request is not authorized here');

/** The key from `Authorization: Bearer` or the envelope's `apikey`; both present and different is refused. */
function presentedKey(header: string | string[] | undefined, apikey: unknown): string | undefined {
  let fromHeader: string | undefined;
  if (header !== undefined) {
    const match = typeof header === 'string' ? BEARER.exec(header.trim()) : null;
    if (!match) throw deny('malformed_authorization', 'the Authorization header must be "Bearer <key>"');
    fromHeader = match[1];
  }
  const fromEnvelope = apikey === null || apikey === undefined ? undefined : apikey;
  if (fromEnvelope !== undefined && (typeof fromEnvelope !== 'string' || fromEnvelope === '')) throw deny('malformed_key', 'apikey must be a key string');
  if (fromHeader !== undefined && fromEnvelope !== undefined && fromHeader !== fromEnvelope) {
    throw deny('conflicting_keys', 'the Authorization header and the envelope carry different keys');
  }
  return fromHeader ?? fromEnvelope;
}

type SocketFacts = NonNullable<AuthorizationRequest['socket']>;

// A keep-alive connection carries many requests: its identity is built and frozen once, then shared.
const identities = new WeakMap<SocketFacts, SocketIdentity>();

function socketIdentity(socket: AuthorizationRequest['socket']): SocketIdentity | null {
  if (!socket) return null;
  let identity = identities.get(socket);
  if (!identity) {
    identity = Object.freeze({ remoteAddress: socket.remoteAddress ?? null, remotePort: socket.remotePort ?? null, encrypted: socket.encrypted === true });
    identities.set(socket, identity);
  }
  return identity;
}

// One frozen user per cached key record, shared by its requests.
const users = new WeakMap<KnownKey, AuthorizedUser>();

function userOf(known: KnownKey, platform: boolean): AuthorizedUser {
  let user = users.get(known);
  if (!user || user.platform !== platform) {
    user = Object.freeze({ key_id: known.record._id, name: known.record.name, admin: known.record.admin, platform });
    users.set(known, user);
  }
  return user;
}

/**
 * SPEC 8.3, `server.authorize`: resolves the organization from the host, the key from the request, evaluates
 * permissions and hands back the sanitized, frozen envelope. Every refusal is an `AuthorizationError`.
 */
export class Authorizer {
  readonly directory: TenantDirectory;
  private readonly log: AuthorizationLog | undefined;

  constructor(store: Store, options: AuthorizerOptions = {}) {
    this.directory = new TenantDirectory(store, options);
    this.log = options.log;
  }

  async request(request: AuthorizationRequest, envelope: unknown): Promise<AuthorizedEnvelope> {
    try {
      return await this.authorize(request, envelope);
    } catch (error) {
      if (!(error instanceof AuthorizationError)) throw error;
      const method = (envelope as Partial<Envelope> | null)?.method;
      this.log?.info({ code: error.code, method: typeof method === 'string' ? method.slice(0, 200) : undefined }, 'authorization denied');
      throw error;
    }
  }

  close(): void {
    this.directory.close();
  }

  private async authorize(request: AuthorizationRequest, envelope: unknown): Promise<AuthorizedEnvelope> {
    if (!envelopeCheck.Check(envelope)) throw deny('invalid_envelope', 'the envelope must be an object with a "method" such as "object.read"', 400);
    const host = normalizeHost(request.host);
    const key = presentedKey(request.headers.authorization, envelope.apikey);
    const parsed = key === undefined ? undefined : parseKey(key);
    if (key !== undefined && !parsed) throw deny('malformed_key', 'the key is not in the fleetplane key format');
    // Cache hits are answered without waiting: most requests come from a few hosts and keys.
    const organization = host === undefined ? null : (this.directory.cachedOrganization(host) ?? (await this.directory.organizationForHost(host)));
    if (!organization) {
      // As long as a known host's refusal takes: the key is hashed either way.
      if (parsed) secretMatches(parsed.secret, UNKNOWN_KEY_HASH);
      throw refused();
    }
    let known: KnownKey | undefined;
    if (parsed) known = checkKey(parsed.secret, this.directory.cachedKey(parsed.keyId) ?? (await this.directory.key(parsed.keyId)), organization._id, host!);
    const permitted = isPermitted({ admin: known?.record.admin, permissions: known?.record.permissions, defaults: organization.defaultPermissions }, envelope);
    // Without a key, "not allowed here" must read the same as "no such host".
    if (!permitted) throw known ? deny('permission_denied', `this key may not call "${envelope.method}"`) : refused();
    let platform = false;
    if (known) {
      const platformId = this.directory.cachedPlatformOrganization() ?? (await this.directory.platformOrganization());
      platform = platformId === organization._id;
    }
    if (!platform) {
      const violation = tenantViolation(envelope as Envelope);
      if (violation) throw deny('platform_only', violation);
    }
    const user = known ? userOf(known, platform) : null;
    try {
      return sanitizeEnvelope(envelope as Envelope, { organization_id: organization._id, host: host!, user, socket: socketIdentity(request.socket) });
    } catch (error) {
      if (error instanceof EnvelopeTooDeepError) throw deny('invalid_envelope', 'the envelope is nested too deeply', 400);
      throw error;
    }
  }
}

/**
 * The presented secret against the key's record: the secret that last matched this cached record is compared
 * directly (constant time), any other one is hashed, as is a secret for an unknown key id, so a miss costs what
 * a wrong secret costs.
 */
function checkKey(secret: string, known: KnownKey | null, organizationId: string, host: string): KnownKey {
  const matches = known?.verifiedSecret !== undefined && sameSecret(secret, known.verifiedSecret) ? true : secretMatches(secret, known?.hash ?? UNKNOWN_KEY_HASH);
  if (!known || !matches) throw refused();
  known.verifiedSecret = secret;
  if (known.record.organization_id !== organizationId) throw refused();
  if (known.hosts && !known.hosts.has(host)) throw refused();
  // Only the key's holder learns these: the secret matched, on one of its own organization's hosts.
  if (known.record.disabled) throw deny('key_revoked', 'this key has been revoked');
  if (known.expiresAtMs !== undefined && known.expiresAtMs <= Date.now()) throw deny('key_expired', 'this key has expired');
  return known;
}
