import type WebSocket from 'ws';
import { CONNECTING, ws as webSocket } from './ws.js';
import type { Logger } from '../logging/logger.js';
import { reconnectDelayMs, stopsRetries, type ReconnectSchedule } from './backoff.js';
import { dialHeaders, verifyAccept } from './handshake.js';
import type { Corkable } from './link.js';
import type { MeshEvents } from './events.js';
import { peerCertificateOf, type MeshTls, type PeerCertificateCheck } from './settings.js';

/** A running peer as the inventory lists it. */
export interface PeerTarget {
  id: string;
  url: string;
  /** When that peer's primary started: a new value means it restarted since we last tried. */
  startedAt?: string;
}

export interface DialerDeps {
  self: string;
  cluster: string;
  secret?: string;
  /** The mutual-TLS material of the next dial (it may be renewed or reloaded meanwhile). */
  tls?: () => MeshTls | undefined;
  /** Checks the acceptor's certificate names the peer dialed (instead of the URL's host) and is not revoked. */
  peerCheck?: PeerCertificateCheck;
  schedule: ReconnectSchedule;
  maxPayload: number;
  random: () => number;
  log: Logger;
  /** Takes an authenticated socket; false when the mesh will not have it (then it is closed). */
  adopt(ws: WebSocket, target: PeerTarget, socket: Corkable | undefined, onClose: (code: number) => void): boolean;
  notify<E extends 'reconnect' | 'giveup'>(event: E, ...payload: MeshEvents[E]): void;
}

type DialerState = 'connecting' | 'open' | 'waiting' | 'exhausted' | 'released' | 'stopped';

/**
 * The outbound side of one pair: dials the peer, and when the link fails or drops, retries on the SPEC 6.3
 * schedule — at most `maxAttempts` times until the next discovery. A close with 1000 means the peer left on
 * purpose: no retry until the inventory shows it started again.
 */
export class PeerDialer {
  private state: DialerState = 'waiting';
  private attempt = 0;
  private timer: NodeJS.Timeout | undefined;
  private socket: WebSocket | undefined;

  constructor(
    private target: PeerTarget,
    private readonly deps: DialerDeps,
  ) {}

  get peer(): string {
    return this.target.id;
  }

  get status(): DialerState {
    return this.state;
  }

  /** True once it has nothing more to do until a discovery brings the peer back. */
  get idle(): boolean {
    return this.state === 'exhausted' || this.state === 'released' || this.state === 'stopped';
  }

  start(): void {
    this.connect();
  }

  /** A discovery listed the peer again: a dialer that gave up gets a new budget; a restarted peer is dialed now. */
  rediscovered(target: PeerTarget): void {
    const restarted = target.startedAt !== undefined && target.startedAt !== this.target.startedAt;
    this.target = target;
    if (this.state === 'exhausted' || ((this.state === 'released' || this.state === 'waiting') && restarted)) {
      this.attempt = 0;
      this.connect();
    }
  }

  stop(): void {
    this.state = 'stopped';
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    if (this.socket && this.socket.readyState === CONNECTING) this.socket.terminate();
  }

  private connect(): void {
    if (this.state === 'stopped') return;
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    this.state = 'connecting';
    const { self, cluster, secret, log } = this.deps;
    const tls = this.deps.tls?.();
    const peer = this.target.id;
    const { headers, nonce } = dialHeaders({ server: self, cluster, to: peer }, secret);
    let ws: WebSocket;
    try {
      ws = new (webSocket())(this.target.url, {
        headers,
        perMessageDeflate: false,
        maxPayload: this.deps.maxPayload,
        handshakeTimeout: 10_000,
        followRedirects: false,
        ...(tls ? { key: tls.key, cert: tls.cert, ca: tls.ca } : {}),
        // The certificate names a server, not a host: `peerCheck` checks it against the peer dialed.
        ...(this.deps.peerCheck ? { checkServerIdentity: () => undefined } : {}),
      });
    } catch (error) {
      log.warn({ err: error, peer, url: this.target.url }, 'mesh peer URL is unusable');
      return this.failed(undefined);
    }
    this.socket = ws;
    let adopted = false;
    let socket: Corkable | undefined;
    ws.on('upgrade', (response) => {
      socket = response.socket;
      const problem = verifyAccept(response.headers, { peer, self, cluster, nonce }, secret) ?? this.deps.peerCheck?.(peerCertificateOf(response.socket), peer);
      if (problem) {
        log.warn({ peer, url: this.target.url, reason: problem }, 'mesh peer failed authentication: not linking');
        ws.terminate();
      }
    });
    ws.on('open', () => {
      if (this.state === 'stopped') return ws.close(1000);
      adopted = this.deps.adopt(ws, this.target, socket, (code) => this.dropped(code));
      if (!adopted) return ws.close(1008, 'already linked');
      this.state = 'open';
      this.attempt = 0;
    });
    ws.on('error', (error) => log.debug({ err: error, peer }, 'mesh dial failed'));
    ws.on('close', (code) => {
      if (this.socket === ws) this.socket = undefined;
      // An adopted socket reports its close through the link (`dropped`).
      if (!adopted) this.failed(code);
    });
  }

  private dropped(code: number): void {
    if (this.state === 'stopped') return;
    if (stopsRetries(code)) {
      this.deps.log.info({ peer: this.target.id, code }, 'mesh peer closed the link for good: not retrying');
      this.state = 'released';
      return;
    }
    this.failed(code);
  }

  private failed(code: number | undefined): void {
    if (this.state === 'stopped') return;
    const { schedule, random } = this.deps;
    if (this.attempt >= schedule.maxAttempts) {
      this.state = 'exhausted';
      this.deps.log.warn({ peer: this.target.id, attempts: this.attempt }, 'mesh peer unreachable: waiting for the next discovery');
      this.deps.notify('giveup', { peer: this.target.id, attempts: this.attempt });
      return;
    }
    const attempt = this.attempt++;
    const delayMs = reconnectDelayMs(attempt, schedule, random);
    this.state = 'waiting';
    this.deps.log.info({ peer: this.target.id, attempt, delayMs, code }, 'mesh reconnect scheduled');
    this.deps.notify('reconnect', { peer: this.target.id, attempt, delayMs, ...(code === undefined ? {} : { code }) });
    this.timer = setTimeout(() => this.connect(), delayMs);
    this.timer.unref();
  }
}
