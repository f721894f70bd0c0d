import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';

/** How far a handshake's timestamp may be from this server's clock (both ways: clocks drift). */
export const HANDSHAKE_WINDOW_MS = 30_000;

export const HEADER = {
  server: 'x-fleetplane-server',
  cluster: 'x-fleetplane-cluster',
  to: 'x-fleetplane-to',
  timestamp: 'x-fleetplane-timestamp',
  nonce: 'x-fleetplane-nonce',
  signature: 'x-fleetplane-signature',
} as const;

const ID = /^[A-Za-z0-9._-]{1,128}$/;
const NONCE = /^[0-9a-f]{32}$/;
const SIGNATURE = /^[0-9a-f]{64}$/;

/** What a dialing server claims; the signature covers every field, so none can be swapped in transit. */
export interface DialClaim {
  server: string;
  cluster: string;
  /** The server it means to reach: a handshake captured on its way to one server is useless at another. */
  to: string;
  timestamp: number;
  nonce: string;
}

const sign = (secret: string, parts: Array<string | number>) => createHmac('sha256', secret).update(['fleetplane-mesh-v1', ...parts].join('\n')).digest('hex');

function sameSignature(expected: string, given: string): boolean {
  return SIGNATURE.test(given) && timingSafeEqual(Buffer.from(expected, 'hex'), Buffer.from(given, 'hex'));
}

/** Upgrade-request headers of a dialer; the signature is left out in mutual-TLS mode without a secret. */
export function dialHeaders(claim: Omit<DialClaim, 'timestamp' | 'nonce'>, secret: string | undefined, now = Date.now()): { headers: Record<string, string>; nonce: string } {
  const nonce = randomBytes(16).toString('hex');
  const headers: Record<string, string> = {
    [HEADER.server]: claim.server,
    [HEADER.cluster]: claim.cluster,
    [HEADER.to]: claim.to,
    [HEADER.timestamp]: String(now),
    [HEADER.nonce]: nonce,
  };
  if (secret) headers[HEADER.signature] = sign(secret, ['dial', claim.server, claim.cluster, claim.to, now, nonce]);
  return { headers, nonce };
}

export type ClaimCheck = { ok: true; claim: DialClaim } | { ok: false; status: number; reason: string; server?: string };

const header = (headers: IncomingHttpHeaders, name: string): string | undefined => {
  const value = headers[name];
  return typeof value === 'string' ? value : undefined;
};

/**
 * Reads and authenticates a dialer's claim: well-formed, signed with the cluster secret (when there is one)
 * and fresh. Replays are caught by the caller's nonce cache, which only ever sees authenticated nonces.
 */
export function verifyDial(headers: IncomingHttpHeaders, secret: string | undefined, now = Date.now()): ClaimCheck {
  const server = header(headers, HEADER.server);
  const cluster = header(headers, HEADER.cluster);
  const to = header(headers, HEADER.to);
  const timestamp = Number(header(headers, HEADER.timestamp));
  const nonce = header(headers, HEADER.nonce);
  const signature = header(headers, HEADER.signature);
  if (!server || !cluster || !to || !nonce) return { ok: false, status: 401, reason: 'not a mesh handshake' };
  if (!ID.test(server) || !ID.test(to) || cluster.length > 128 || !NONCE.test(nonce) || !Number.isSafeInteger(timestamp)) {
    return { ok: false, status: 401, reason: 'malformed handshake', server: ID.test(server) ? server : undefined };
  }
  if (secret) {
    if (!signature || !sameSignature(sign(secret, ['dial', server, cluster, to, timestamp, nonce]), signature)) {
      return { ok: false, status: 401, reason: 'bad handshake signature', server };
    }
  }
  if (Math.abs(now - timestamp) > HANDSHAKE_WINDOW_MS) return { ok: false, status: 401, reason: 'handshake outside the time window', server };
  return { ok: true, claim: { server, cluster, to, timestamp, nonce } };
}

/** The acceptor's answer, bound to the dialer's nonce so the dialer knows it reached the server it meant. */
export function acceptHeaders(self: string, claim: DialClaim, secret: string | undefined, now = Date.now()): string[] {
  const lines = [`${HEADER.server}: ${self}`, `${HEADER.timestamp}: ${now}`];
  if (secret) lines.push(`${HEADER.signature}: ${sign(secret, ['accept', self, claim.cluster, claim.server, claim.nonce, now])}`);
  return lines;
}

/** The dialer's check of the acceptor's answer. Returns the reason it fails, or undefined when it is good. */
export function verifyAccept(headers: IncomingHttpHeaders, expected: { peer: string; self: string; cluster: string; nonce: string }, secret: string | undefined, now = Date.now()): string | undefined {
  const server = header(headers, HEADER.server);
  if (server !== expected.peer) return `answered as "${server ?? 'nobody'}", expected "${expected.peer}"`;
  if (!secret) return undefined;
  const timestamp = Number(header(headers, HEADER.timestamp));
  const signature = header(headers, HEADER.signature) ?? '';
  if (!Number.isSafeInteger(timestamp) || Math.abs(now - timestamp) > HANDSHAKE_WINDOW_MS) return 'answer outside the time window';
  if (!sameSignature(sign(secret, ['accept', server, expected.cluster, expected.self, expected.nonce, timestamp]), signature)) return 'bad answer signature';
  return undefined;
}

/**
 * Nonces of authenticated handshakes inside the time window. Entries older than the window can go: a
 * replay of them fails the timestamp check anyway. Bounded so a peer holding the secret cannot grow it.
 */
export class NonceCache {
  private readonly seen = new Map<string, number>();
  private prunedAt = 0;

  constructor(
    private readonly windowMs = HANDSHAKE_WINDOW_MS,
    private readonly maxEntries = 100_000,
  ) {}

  /** Records `nonce`; false when it was already seen (a replay) or the cache is full of live entries. */
  remember(nonce: string, timestamp: number, now = Date.now()): boolean {
    if (this.seen.has(nonce)) return false;
    if (this.seen.size >= this.maxEntries || now - this.prunedAt > 1_000) this.prune(now);
    if (this.seen.size >= this.maxEntries) return false;
    this.seen.set(nonce, timestamp);
    return true;
  }

  prune(now = Date.now()): void {
    this.prunedAt = now;
    // The window is symmetric: a timestamp up to windowMs in the future stays replayable for 2 × windowMs.
    for (const [nonce, timestamp] of this.seen) if (now - timestamp > this.windowMs) this.seen.delete(nonce);
  }

  get size(): number {
    return this.seen.size;
  }
}
