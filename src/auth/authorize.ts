import type { OrganizationDocument } from '../db/documents.js';
import type { Store } from '../db/types.js';
import { RateLimitedWarnings } from '../logging/rate-limited.js';
import { sleep, systemClock, type Clock } from '../runtime/clock.js';
import { TrustedProxies, failureKey, normalizeAddress } from './client-address.js';
import { TenantDirectory, type DirectoryOptions, type KnownKey } from './directory.js';
import { EnvelopeTooDeepError, envelopeCheck, sanitizeEnvelope, type AuthorizedEnvelope, type AuthorizedUser, type Envelope, type SocketIdentity } from './envelope.js';
import { AuthorizationError } from './errors.js';
import { normalizeHost } from './host.js';
import { parseKey, sameSecret, secretMatches } from './keys.js';
import { isPermitted } from './permissions.js';
import { tenantViolation } from './authority.js';
import { FAILURE_LIMIT_DEFAULTS, FailureLimiter, type FailureLimitSettings } from './failure-limit.js';

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
  /** Denial lines per window (default 50 per 10 s); the rest are counted in one summary line per window. */
  denialLog?: { max: number; windowMs: number };
  /** SPEC 8.7: failed authentications allowed per client address, and how long a 429 is held (`auth.failureLimit`). */
  failureLimit?: FailureLimitSettings;
  /** Proxies whose `X-Forwarded-For` names the client (`http.trustProxy`): addresses or CIDR ranges. */
  trustedProxies?: readonly string[];
  /** Time of the failure limit and the denial log (default: the system clock). */
  clock?: Clock;
}

const DENIAL_LOG = { max: 50, windowMs: 10_000 };
/** 429s held at once at most; past that they are answered at once, so holding them cannot exhaust memory. */
const MAX_HELD_REFUSALS = 1_000;
const BEARER = /^Bearer ([^\s]+)$/i;
/** Hashed when the key id or the host is unknown, so a miss costs what a wrong secret costs. */
const UNKNOWN_KEY_HASH = Buffer.alloc(32);

/**
 * Refusals are answers, not faults: they are built without a stack trace, which would cost more than the rest
 * of a refusal, and anyone can cause thousands a second.
 */
function refusal(code: string, message: string, statusCode: 400 | 403 | 429, retryAfterS?: number): AuthorizationError {
  const limit = Error.stackTraceLimit;
  Error.stackTraceLimit = 0;
  try {
    return new AuthorizationError(code, message, statusCode, retryAfterS);
  } finally {
    Error.stackTraceLimit = limit;
  }
}

const deny = (code: string, message: string, statusCode: 400 | 403 = 403) => refusal(code, message, statusCode);
/**
 * SPEC 8.7: the one answer for an unknown host, an unknown key, a wrong secret, another organization's key, a key
 * used on a host outside its list, and a request without a key that its host does not allow: telling them apart
 * would tell a caller which hosts and keys exist.
 */
export const refused = () => deny('forbidden', 'this request is not authorized here');
/** SPEC 8.7: whatever failed, the same answer once an address is past its failed-authentication limit. */
const tooManyFailures = (retryAfterMs: number) => {
  const seconds = Math.max(1, Math.ceil(retryAfterMs / 1000));
  return refusal('too_many_requests', `too many failed authentications from this address: retry in ${seconds} s`, 429, seconds);
};

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
  /** Anyone can cause denials at will, a thousand a second with made-up keys: their lines are rate-limited. */
  private readonly denials: { lines: RateLimitedWarnings; log: { warn(fields: object, message: string): void } } | undefined;
  private readonly failures: FailureLimiter;
  private readonly proxies: TrustedProxies;
  private readonly clock: Clock;
  private readonly holdMs: number;
  private held = 0;
  private readonly failureKeys = new WeakMap<SocketFacts, string>();

  constructor(store: Store, options: AuthorizerOptions = {}) {
    this.directory = new TenantDirectory(store, options);
    if (options.log) {
      const { log } = options;
      // Denials are logged at info level, as before they were limited.
      const info = { warn: (fields: object, message: string) => log.info(fields as Record<string, unknown>, message) };
      this.denials = { lines: new RateLimitedWarnings({ ...(options.denialLog ?? DENIAL_LOG), what: 'authorization denials', log: info, clock: options.clock }), log: info };
    }
    this.failures = new FailureLimiter({ ...options.failureLimit, clock: options.clock });
    this.proxies = new TrustedProxies(options.trustedProxies);
    this.clock = options.clock ?? systemClock;
    this.holdMs = options.failureLimit?.delayMs ?? FAILURE_LIMIT_DEFAULTS.delayMs;
  }

  async request(request: AuthorizationRequest, envelope: unknown): Promise<AuthorizedEnvelope> {
    try {
      return await this.authorize(request, envelope);
    } catch (error) {
      if (!(error instanceof AuthorizationError)) throw error;
      if (this.denials) {
        const method = (envelope as Partial<Envelope> | null)?.method;
        const details = { code: error.code, method: typeof method === 'string' ? method.slice(0, 200) : undefined, client: this.clientAddress(request) };
        this.denials.lines.warn(this.denials.log, details, 'authorization denied');
      }
      if (error.statusCode === 429) await this.hold();
      throw error;
    }
  }

  /**
   * The answer `request` would give, without a promise, when every record it needs is cached and the request
   * is authorized: a known host, a key whose secret matched its cached record before, the platform
   * organization known. Anything else (a refusal included) is `undefined`: ask `request`, which decides it
   * the long way and counts, logs and holds what it must.
   */
  cached(request: AuthorizationRequest, envelope: unknown): AuthorizedEnvelope | undefined {
    if (!envelopeCheck.Check(envelope)) return undefined;
    const host = normalizeHost(request.host);
    const organization = host === undefined ? undefined : this.directory.cachedOrganization(host);
    if (!organization) return undefined;
    let known: KnownKey | undefined;
    if (request.headers.authorization !== undefined || (envelope.apikey !== undefined && envelope.apikey !== null)) {
      if (this.failures.size > 0) return undefined;
      const parsed = parseKey(presentedKey(request.headers.authorization, envelope.apikey)!);
      const record = parsed && this.directory.cachedKey(parsed.keyId);
      if (!record?.verifiedSecret || !sameSecret(parsed!.secret, record.verifiedSecret) || !keyServes(record, organization._id, host!)) return undefined;
      known = record;
    }
    if (!isPermitted({ admin: known?.record.admin, permissions: known?.record.permissions, defaults: organization.defaultPermissions }, envelope)) return undefined;
    let platform = false;
    if (known) {
      const platformId = this.directory.cachedPlatformOrganization();
      if (platformId === undefined) return undefined;
      platform = platformId === organization._id;
    }
    if (!platform && tenantViolation(envelope as Envelope)) return undefined;
    try {
      return sanitizeEnvelope(envelope as Envelope, { organization_id: organization._id, host: host!, user: known ? userOf(known, platform) : null, socket: socketIdentity(request.socket) });
    } catch {
      return undefined;
    }
  }

  /**
   * A client past its limit waits for its 429. However cheap a refusal, answering a flood at once lets it take
   * the worker's time from everyone else; held, a client that waits for its answers (as scripts do) sends a
   * few requests per connection per second instead of thousands.
   */
  private async hold(): Promise<void> {
    if (this.holdMs === 0 || this.held >= MAX_HELD_REFUSALS) return;
    this.held++;
    try {
      await sleep(this.clock, this.holdMs);
    } finally {
      this.held--;
    }
  }

  /** The client's address: the socket's peer, or behind a trusted proxy the address it forwarded. */
  clientAddress(request: AuthorizationRequest): string {
    return this.proxies.clientAddress(request.socket?.remoteAddress, request.headers['x-forwarded-for']);
  }

  /**
   * What failures of this request's client are counted under. A connection straight from its client has one
   * client for its lifetime, worked out once; a trusted proxy's connection carries many clients' requests.
   */
  private failureKeyOf(request: AuthorizationRequest): string {
    const socket = request.socket;
    const known = socket && this.failureKeys.get(socket);
    if (known) return known;
    const key = failureKey(this.clientAddress(request));
    if (socket && !this.proxies.trusts(normalizeAddress(socket.remoteAddress ?? ''))) this.failureKeys.set(socket, key);
    return key;
  }

  close(): void {
    this.directory.close();
  }

  private async authorize(request: AuthorizationRequest, envelope: unknown): Promise<AuthorizedEnvelope> {
    if (!envelopeCheck.Check(envelope)) throw deny('invalid_envelope', 'the envelope must be an object with a "method" such as "object.read"', 400);
    const host = normalizeHost(request.host);
    let organization: OrganizationDocument | null;
    let known: KnownKey | undefined;
    if (request.headers.authorization !== undefined || (envelope.apikey !== undefined && envelope.apikey !== null)) {
      ({ organization, known } = await this.authenticate(request, host, envelope.apikey));
    } else {
      organization = await this.organizationOf(host);
      if (!organization) throw refused();
    }
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

  /** Cache hits are answered without waiting: most requests come from a few hosts. */
  private async organizationOf(host: string | undefined): Promise<OrganizationDocument | null> {
    return host === undefined ? null : (this.directory.cachedOrganization(host) ?? (await this.directory.organizationForHost(host)));
  }

  /**
   * A request that presents a key: the key must check out on this host. Every way it can fail counts against
   * the client's address (SPEC 8.7); past the limit the answer is 429, and a key id this process knows nothing
   * about is read from the store at most once every `windowMs / max`, so a flood of made-up keys costs next to
   * nothing. A key that checks out still passes: an attacker sharing an address (a NAT, a proxy) cannot lock
   * its holder out.
   */
  private async authenticate(request: AuthorizationRequest, host: string | undefined, apikey: unknown): Promise<{ organization: OrganizationDocument; known: KnownKey }> {
    const client = this.failures.enabled ? this.failureKeyOf(request) : '';
    const limitedMs = this.failures.retryAfterMs(client);
    try {
      const key = presentedKey(request.headers.authorization, apikey)!;
      const parsed = parseKey(key);
      if (!parsed) throw limitedMs > 0 ? tooManyFailures(limitedMs) : deny('malformed_key', 'the key is not in the fleetplane key format');
      if (limitedMs > 0 && !this.mayStillCheckOut(client, parsed.keyId)) throw tooManyFailures(limitedMs);
      const organization = await this.organizationOf(host);
      if (!organization) {
        // As long as a known host's refusal takes: the key is hashed either way.
        secretMatches(parsed.secret, UNKNOWN_KEY_HASH);
        throw refused();
      }
      const known = checkKey(parsed.secret, this.directory.cachedKey(parsed.keyId) ?? (await this.directory.key(parsed.keyId)), organization._id, host!);
      if (this.failures.size > 0) this.failures.succeeded(client, parsed.keyId);
      return { organization, known };
    } catch (error) {
      if (!(error instanceof AuthorizationError) || error.statusCode === 429) throw error;
      const retryAfterMs = this.failures.fail(client);
      throw retryAfterMs > 0 ? tooManyFailures(retryAfterMs) : error;
    }
  }

  /**
   * Whether a key may be checked while its address is over the limit: when this process has its record (or
   * the answer "no such key") cached, or it checked out from this address since the address began failing, or
   * within the address's allowance of one store read every `windowMs / max` (see `FailureLimiter.takeLookup`).
   * Anything more would cost store reads at the attacker's pace, which is what the attacker is after.
   */
  private mayStillCheckOut(client: string, keyId: string): boolean {
    const cached = this.directory.cachedKey(keyId);
    if (cached !== undefined) return cached !== null;
    return this.directory.remembersKey(keyId) || this.failures.verified(client, keyId) || this.failures.takeLookup(client);
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

/** Whether a key whose secret matched may be used for this organization on this host, as `checkKey` decides. */
function keyServes(known: KnownKey, organizationId: string, host: string): boolean {
  return (
    known.record.organization_id === organizationId &&
    (!known.hosts || known.hosts.has(host)) &&
    !known.record.disabled &&
    (known.expiresAtMs === undefined || known.expiresAtMs > Date.now())
  );
}
