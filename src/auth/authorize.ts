import type { OrganizationDocument } from '../db/documents.js';
import type { Store } from '../db/types.js';
import { RateLimitedWarnings } from '../logging/rate-limited.js';
import { sleep, type Clock } from '../runtime/clock.js';
import { TrustedProxies, failureKey, normalizeAddress } from './client-address.js';
import { TenantDirectory, type DirectoryOptions, type KnownKey } from './directory.js';
import { EnvelopeTooDeepError, envelopeCheck, sanitizeEnvelope, type AuthorizedEnvelope, type AuthorizedUser, type Envelope, type SocketIdentity } from './envelope.js';
import { AUTH_ERRORS, AuthorizationError } from './errors.js';
import { normalizeHost } from './host.js';
import { parseKey, sameSecret, secretMatches } from './keys.js';
import { IDENTITY_REFUSALS, UNKNOWN_KEY_HASH, checkKey, keyRefusal, presentedKey, refused, tooManyFailures } from './refusals.js';
import { isPermitted } from './permissions.js';
import { internalViolation, tenantViolation } from './authority.js';
import { FAILURE_LIMIT_DEFAULTS, FailureLimiter, failureReportCheck, type FailureLedger, type FailureLimitSettings } from './failure-limit.js';

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
  /**
   * SPEC 8.7: a refusal of who the caller is (`auth.refusalFloorMs`, default 5) is answered no sooner than this
   * after its request reached authorization, so how long the checks took cannot tell which one failed.
   */
  refusalFloorMs?: number;
  /**
   * Where failures are counted, when not here: a worker's primary, so that the allowance of an address is the
   * server's, not each worker's. Unset, this process counts them (the primary, single-process mode).
   */
  failureLedger?: FailureLedger;
  /** Proxies whose `X-Forwarded-For` names the client (`http.trustProxy`): addresses or CIDR ranges. */
  trustedProxies?: readonly string[];
  /** Time of the failure limit and the denial log (default: the system clock). */
  clock?: Clock;
}

const DENIAL_LOG = { max: 50, windowMs: 10_000 };
/**
 * The system clock, with timers that hold the process: a held refusal is an answer owed to a client, like any
 * request in flight (and it is held for at most `delayMs`).
 */
const answeringClock: Clock = {
  now: () => Date.now(),
  setTimeout(fn, ms) {
    const timer = setTimeout(fn, ms);
    return () => clearTimeout(timer);
  },
};
/** 429s held at once at most; past that they are answered at once, so holding them cannot exhaust memory. */
const MAX_HELD_REFUSALS = 1_000;
export const REFUSAL_FLOOR_MS = 5;

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
  /** The allowance of each failing address: the ledger itself, or (with `failureLedger`) this process's view of it. */
  private readonly failures: FailureLimiter;
  private readonly ledger: FailureLedger | undefined;
  private readonly proxies: TrustedProxies;
  private readonly clock: Clock;
  private readonly holdMs: number;
  private readonly floorMs: number;
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
    this.ledger = options.failureLedger;
    this.proxies = new TrustedProxies(options.trustedProxies);
    this.clock = options.clock ?? answeringClock;
    this.holdMs = options.failureLimit?.delayMs ?? FAILURE_LIMIT_DEFAULTS.delayMs;
    this.floorMs = options.refusalFloorMs ?? REFUSAL_FLOOR_MS;
  }

  async request(request: AuthorizationRequest, envelope: unknown): Promise<AuthorizedEnvelope> {
    const arrivedMs = this.clock.now();
    try {
      return await this.authorize(request, envelope);
    } catch (error) {
      if (!(error instanceof AuthorizationError)) throw error;
      if (this.denials) {
        const method = (envelope as Partial<Envelope> | null)?.method;
        const details = { code: error.code, method: typeof method === 'string' ? method.slice(0, 200) : undefined, client: this.clientAddress(request) };
        this.denials.lines.warn(this.denials.log, details, 'authorization denied');
      }
      if (IDENTITY_REFUSALS.has(error.code)) await this.holdUntil(arrivedMs + (error.statusCode === 429 ? Math.max(this.holdMs, this.floorMs) : this.floorMs));
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
    if (presentsKey(request, envelope)) {
      if (this.failures.size > 0) return undefined;
      const presented = presentedOrNothing(request, envelope);
      // A key that cannot be read is a failure to count and hold: the long way's.
      if (presented === undefined) return undefined;
      const parsed = parseKey(presented);
      const record = parsed && this.directory.cachedKey(parsed.keyId);
      if (!record?.verifiedSecret || !sameSecret(parsed!.secret, record.verifiedSecret) || keyRefusal(record, organization._id, host!) !== undefined) return undefined;
      known = record;
    }
    const platformId = known ? this.directory.cachedPlatformOrganization() : null;
    if (platformId === undefined) return undefined;
    try {
      return verdict(envelope, { organization, known, platformId, host: host!, socket: request.socket });
    } catch {
      // A refusal is decided the long way, which counts, logs and holds it.
      return undefined;
    }
  }

  /**
   * A refusal is answered at a time fixed by its request's arrival: a 429 `delayMs` after it, any other refusal
   * of who the caller is `refusalFloorMs` after it. The deadline, not a delay after the checks, is what makes
   * an unknown host or key id (a store read) take as long as a known one (a cache hit). And a client past its
   * limit waits for its 429: however cheap a refusal, answering a flood at once lets it take the worker's time
   * from everyone else; held, a client that waits for its answers (as scripts do) sends a few requests per
   * connection per second instead of thousands.
   */
  private async holdUntil(deadlineMs: number): Promise<void> {
    const waitMs = deadlineMs - this.clock.now();
    if (waitMs <= 0 || this.held >= MAX_HELD_REFUSALS) return;
    this.held++;
    try {
      await sleep(this.clock, waitMs);
    } finally {
      this.held--;
    }
  }

  /**
   * A failure another process of this server reports (`FailureReport`): counted here, as this process's own
   * are, with the same answer (0, or the milliseconds until the address may fail again).
   */
  reportedFailure(report: unknown): number {
    if (!failureReportCheck.Check(report)) throw new Error('a failure report is { address: string }');
    return this.failures.fail(report.address);
  }

  /**
   * Counts a failure where this server counts them. A ledger that cannot be asked (the primary is going away)
   * is no reason to stop limiting: this process counts on its own until it can again.
   */
  private async countFailure(client: string): Promise<number> {
    if (!this.ledger) return this.failures.fail(client);
    let retryAfterMs: number;
    try {
      retryAfterMs = await this.ledger.fail(client);
    } catch {
      return this.failures.fail(client);
    }
    if (typeof retryAfterMs !== 'number' || !(retryAfterMs >= 0)) return this.failures.fail(client);
    this.failures.observe(client, retryAfterMs);
    return retryAfterMs;
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
    if (!envelopeCheck.Check(envelope)) throw AUTH_ERRORS.invalidEnvelope('the envelope must be an object with a "method" such as "object.read"');
    const host = normalizeHost(request.host);
    let organization: OrganizationDocument | null;
    let known: KnownKey | undefined;
    if (presentsKey(request, envelope)) {
      ({ organization, known } = await this.authenticate(request, host, envelope.apikey));
    } else {
      organization = await this.organizationOf(host);
      if (!organization) throw refused();
    }
    const platformId = known ? (this.directory.cachedPlatformOrganization() ?? (await this.directory.platformOrganization())) : null;
    return verdict(envelope, { organization, known, platformId, host: host!, socket: request.socket });
  }

  /** Cache hits are answered without waiting: most requests come from a few hosts. */
  private async organizationOf(host: string | undefined): Promise<OrganizationDocument | null> {
    return host === undefined ? null : (this.directory.cachedOrganization(host) ?? (await this.directory.organizationForHost(host)));
  }

  /**
   * A request that presents a key: the key must check out on this host. Every way it can fail counts against
   * the client's address, alike (SPEC 8.7); past the limit the answer is 429 whatever failed, and a key id this
   * process knows nothing about is read from the store at most once every `windowMs / max`, so a flood of
   * made-up keys costs next to nothing (a key not read is refused and counted as one read and found wrong is).
   * A key that checks out still passes: an attacker sharing an address (a NAT, a proxy) cannot lock its holder
   * out.
   */
  private async authenticate(request: AuthorizationRequest, host: string | undefined, apikey: unknown): Promise<{ organization: OrganizationDocument; known: KnownKey }> {
    const client = this.failures.enabled ? this.failureKeyOf(request) : '';
    const limited = this.failures.retryAfterMs(client) > 0;
    try {
      const key = presentedKey(request.headers.authorization, apikey)!;
      const parsed = parseKey(key);
      if (!parsed) throw AUTH_ERRORS.malformedKey('the key is not in the fleetplane key format');
      if (limited && !(await this.mayStillCheckOut(client, parsed.keyId))) throw refused();
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
      if (!(error instanceof AuthorizationError)) throw error;
      const retryAfterMs = this.failures.enabled ? await this.countFailure(client) : 0;
      throw retryAfterMs > 0 ? tooManyFailures(retryAfterMs) : error;
    }
  }

  /**
   * Whether a key may be checked while its address is over the limit: when this process has its record (or
   * the answer "no such key") cached, or it checked out from this address since the address began failing, or
   * the store holds a key of that id (by the list of ids `TenantDirectory.keyExists` keeps, read again only when
   * `keys` change), or within the address's allowance of one store read every `windowMs / max` (see
   * `FailureLimiter.takeLookup`). Anything more would cost store reads at the attacker's pace, which is what the
   * attacker is after; an existing key id costs at most one read of its record per cache period.
   */
  private async mayStillCheckOut(client: string, keyId: string): Promise<boolean> {
    const cached = this.directory.cachedKey(keyId);
    if (cached !== undefined) return cached !== null;
    if (this.directory.remembersKey(keyId) || this.failures.verified(client, keyId)) return true;
    return (await this.directory.keyExists(keyId)) || this.failures.takeLookup(client);
  }
}

/** The key presented, or `undefined` when none can be read (a malformed header, two different keys). */
function presentedOrNothing(request: AuthorizationRequest, envelope: Envelope): string | undefined {
  try {
    return presentedKey(request.headers.authorization, envelope.apikey);
  } catch {
    return undefined;
  }
}

/** Whether the request presents a key (a header, or the envelope's `apikey`). */
function presentsKey(request: AuthorizationRequest, envelope: Envelope): boolean {
  return request.headers.authorization !== undefined || (envelope.apikey !== undefined && envelope.apikey !== null);
}

/** What authorization has established before it decides: the host's organization, the key that checked out. */
interface Facts {
  organization: OrganizationDocument;
  /** The key presented, once it checked out for this organization and host (see `checkKey`); none without a key. */
  known: KnownKey | undefined;
  /** The platform organization's id (asked only when a key was presented; null when there is none). */
  platformId: string | null;
  host: string;
  socket: AuthorizationRequest['socket'];
}

/**
 * The rules that decide an envelope once its facts are known: its method permitted to the key (or to the
 * organization's defaults without one) and not internal, platform-only fields kept to the platform
 * organization, its nesting bounded. Both paths apply these and only these: `Authorizer.cached` with the facts
 * its caches hold, the full path with those it read. Throws the refusal.
 */
function verdict(envelope: Envelope, facts: Facts): AuthorizedEnvelope {
  const { organization, known } = facts;
  const permitted = isPermitted({ admin: known?.record.admin, permissions: known?.record.permissions, defaults: organization.defaultPermissions }, envelope);
  // No grant makes an internal method callable, so a key is told that rather than which permission it lacks.
  const internal = known || permitted ? internalViolation(envelope.method) : undefined;
  if (internal) throw AUTH_ERRORS.forbidden(internal);
  // Without a key, "not allowed here" must read the same as "no such host".
  if (!permitted) throw known ? AUTH_ERRORS.permissionDenied(envelope.method) : refused();
  const platform = known !== undefined && facts.platformId === organization._id;
  if (!platform) {
    const violation = tenantViolation(envelope);
    if (violation) throw AUTH_ERRORS.platformOnly(violation);
  }
  const user = known ? userOf(known, platform) : null;
  try {
    return sanitizeEnvelope(envelope, { organization_id: organization._id, host: facts.host, user, socket: socketIdentity(facts.socket) });
  } catch (error) {
    if (error instanceof EnvelopeTooDeepError) throw AUTH_ERRORS.invalidEnvelope('the envelope is nested too deeply');
    throw error;
  }
}
