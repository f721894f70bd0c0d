import type WebSocket from 'ws';
import { OPEN } from './ws.js';
import type { Logger } from '../logging/logger.js';
import { MeshError } from './errors.js';
import { parseFrame, type FrameOf, type PeerFrame } from './frames.js';

/** Refused frames tolerated per window before the link is closed with 1008 (policy violation). */
export const ABUSE_LIMIT = 10;
export const ABUSE_WINDOW_MS = 10_000;
/** How long a closing link waits for the peer's close frame before it drops the socket. */
const CLOSE_GRACE_MS = 2_000;
/** How long a healthy peer may take to answer a ping before it is no longer sent clients (see `Link.answering`). */
const SUSPECT_AFTER_MS = 1_000;

/** The link's TCP (or TLS) socket, for batching writes. */
export interface Corkable {
  cork(): void;
  uncork(): void;
}

export interface LinkOptions {
  peer: string;
  socket?: Corkable;
  direction: 'in' | 'out';
  maxBufferedBytes: number;
  maxFrameBytes: number;
  pingIntervalMs: number;
  pongTimeoutMs: number;
  log: Logger;
}

export interface LinkHandler {
  /** A validated `envelope` or `call` frame for this server. */
  onRequest(link: PeerLink, frame: FrameOf<'envelope'> | FrameOf<'call'>): void;
  onClose(link: PeerLink, code: number, reason: string): void;
  /** The peer's first `hello`: from now on the link is `ready`. */
  onGreeted(link: PeerLink): void;
}

type Reply = FrameOf<'replies'> | FrameOf<'result'> | FrameOf<'error'>;
type Outgoing = PeerFrame | { type: string; [field: string]: unknown };

/**
 * One authenticated WebSocket to a peer, in either direction. Frames are JSON text, validated on arrival;
 * requests are correlated by id; pings detect a peer that went silent; sends past the buffer cap fail
 * instead of queueing without bound.
 */
export class PeerLink {
  readonly organizations = new Set<string>();
  publicUrl: string | undefined;
  private nextId = 1;
  private readonly pending = new Map<number, { resolve: (frame: Reply | undefined) => void; deadline: number }>();
  // One timer per link for every pending call's deadline: a timer per call costs more than the call itself.
  private sweeper: NodeJS.Timeout | undefined;
  private sweepAt = Infinity;
  private strikes: number[] = [];
  private readonly heartbeat: NodeJS.Timeout;
  private pongTimer: NodeJS.Timeout | undefined;
  /** When the ping now waiting for its pong was sent. */
  private pingSentAt: number | undefined;
  /** Why this side dropped the socket without a close handshake (the close event then has no reason). */
  private dropReason: string | undefined;
  private closed = false;
  private greeted = false;
  private corked = false;
  private readonly uncork = () => {
    this.corked = false;
    this.options.socket?.uncork();
  };

  constructor(
    private readonly ws: WebSocket,
    readonly options: LinkOptions,
    private readonly handler: LinkHandler,
  ) {
    ws.on('message', (data, isBinary) => this.receive(data as Buffer, isBinary));
    ws.on('pong', () => this.alive());
    ws.on('error', (error) => options.log.debug({ err: error, peer: options.peer }, 'mesh link error'));
    ws.on('close', (code, reason) => this.closedWith(code, reason.toString('utf8')));
    this.heartbeat = setInterval(() => this.probe(), options.pingIntervalMs);
    this.heartbeat.unref();
  }

  get peer(): string {
    return this.options.peer;
  }

  get direction(): 'in' | 'out' {
    return this.options.direction;
  }

  get open(): boolean {
    return !this.closed && this.ws.readyState === OPEN;
  }

  /**
   * Open, and the peer's `hello` (public URL, organizations) has arrived. Only ready links are listed, chosen
   * for envelopes and fallbacks: before its hello a peer's organizations are unknown, so routing by them would
   * silently skip it.
   */
  get ready(): boolean {
    return this.greeted && this.open;
  }

  get bufferedAmount(): number {
    return this.ws.bufferedAmount;
  }

  /** Sends one frame; throws a `MeshError` when the link is down, the frame too large or the buffer full. */
  send(frame: Outgoing): void {
    if (!this.open) throw new MeshError('unavailable', `the link to ${this.peer} is closed`);
    // Encoded once: the size checks and the socket use the same bytes.
    const bytes = Buffer.from(JSON.stringify(frame));
    if (bytes.length > this.options.maxFrameBytes) throw new MeshError('too_large', `frame is ${bytes.length} bytes; the mesh limit is ${this.options.maxFrameBytes}`);
    if (this.ws.bufferedAmount + bytes.length > this.options.maxBufferedBytes) {
      throw new MeshError('backpressure', `the send buffer to ${this.peer} is full (${this.ws.bufferedAmount} bytes queued, cap ${this.options.maxBufferedBytes})`);
    }
    // Frames sent in one tick (a burst of replies, many requests in flight) leave in one write.
    if (!this.corked && this.options.socket) {
      this.corked = true;
      this.options.socket.cork();
      process.nextTick(this.uncork);
    }
    this.ws.send(bytes, { binary: false });
  }

  /** Sends a request frame and resolves with its reply, or undefined when none comes in time or the link drops. */
  call(frame: Outgoing & { id?: never }, timeoutMs: number): Promise<Reply | undefined> {
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      try {
        this.send({ ...frame, id });
      } catch (error) {
        return reject(error);
      }
      const deadline = Date.now() + timeoutMs;
      this.pending.set(id, { resolve, deadline });
      if (deadline < this.sweepAt) this.sweepAfter(timeoutMs);
    });
  }

  private sweepAfter(ms: number): void {
    if (this.sweeper) clearTimeout(this.sweeper);
    this.sweepAt = Date.now() + ms;
    this.sweeper = setTimeout(() => this.sweep(), ms);
    this.sweeper.unref();
  }

  /** Ends the calls whose deadline passed (their reply is undefined) and waits for the next deadline. */
  private sweep(): void {
    this.sweeper = undefined;
    this.sweepAt = Infinity;
    const now = Date.now();
    let next = Infinity;
    for (const [id, waiting] of this.pending) {
      if (waiting.deadline <= now) {
        this.pending.delete(id);
        waiting.resolve(undefined);
      } else if (waiting.deadline < next) next = waiting.deadline;
    }
    if (next !== Infinity) this.sweepAfter(next - now);
  }

  /** Checks the peer is alive now: no pong within `pongTimeoutMs` drops the link (and the dialer retries). */
  probe(): void {
    if (!this.open || this.pongTimer) return;
    this.pongTimer = setTimeout(() => {
      // Timers run before I/O in an event-loop turn: after a stall, a pong may be waiting unread. Check again
      // once pending I/O has been read (setImmediate runs after the poll phase).
      setImmediate(() => {
        if (!this.pongTimer || this.closed) return;
        this.options.log.warn({ peer: this.peer, timeoutMs: this.options.pongTimeoutMs }, 'mesh peer did not answer a ping: dropping the link');
        this.dropReason = `no pong within ${this.options.pongTimeoutMs} ms`;
        this.ws.terminate();
      });
    }, this.options.pongTimeoutMs);
    this.pongTimer.unref();
    this.pingSentAt = Date.now();
    try {
      this.ws.ping();
    } catch {
      // closing already; the close handler cleans up
    }
  }

  close(code: number, reason = ''): void {
    if (this.closed) return;
    try {
      this.ws.close(code, reason);
    } catch {
      this.ws.terminate();
    }
    // A peer that never answers the close frame must not hold the socket (or the process) open.
    setTimeout(() => this.ws.terminate(), CLOSE_GRACE_MS).unref();
  }

  /** Answers a frame this server will not act on, and closes the link when refusals keep coming. */
  refuse(code: string, message: string, id?: number): void {
    this.options.log.warn({ peer: this.peer, code, reason: message }, 'mesh frame refused');
    try {
      this.send({ type: 'error', ...(id === undefined ? {} : { id }), code, message: message.slice(0, 4096) });
    } catch {
      // the link is full or closing: the refusal itself may be dropped
    }
    const now = Date.now();
    this.strikes = this.strikes.filter((at) => now - at < ABUSE_WINDOW_MS);
    this.strikes.push(now);
    if (this.strikes.length > ABUSE_LIMIT) {
      this.options.log.warn({ peer: this.peer, refused: this.strikes.length, windowMs: ABUSE_WINDOW_MS }, 'mesh peer keeps sending refused frames: closing the link (1008)');
      this.close(1008, 'too many refused frames');
    }
  }

  private alive(): void {
    if (this.pongTimer) clearTimeout(this.pongTimer);
    this.pongTimer = undefined;
    this.pingSentAt = undefined;
  }

  /**
   * Whether the peer answers its pings: no ping has waited for its pong longer than a healthy peer takes (1 s,
   * or half the pong timeout when that is shorter). A link that stops answering keeps carrying envelopes until
   * the pong timeout drops it, but clients are no longer sent to its peer (see `Mesh.peerUrl`).
   */
  get answering(): boolean {
    return this.pingSentAt === undefined || Date.now() - this.pingSentAt < Math.min(SUSPECT_AFTER_MS, this.options.pongTimeoutMs / 2);
  }

  private receive(data: Buffer, isBinary: boolean): void {
    if (this.closed) return;
    const parsed = parseFrame(data, isBinary, this.options.maxFrameBytes);
    if (!parsed.ok) return this.refuse(parsed.code, parsed.message, parsed.id);
    const frame = parsed.frame;
    switch (frame.type) {
      case 'replies':
      case 'result':
        return this.settle(frame.id, frame);
      case 'error':
        if (frame.id !== undefined && this.pending.has(frame.id)) return this.settle(frame.id, frame);
        this.options.log.warn({ peer: this.peer, code: frame.code, reason: frame.message }, 'mesh peer refused a frame of ours');
        return;
      case 'hello':
        this.publicUrl = frame.publicUrl;
        this.organizations.clear();
        for (const id of frame.organizations) this.organizations.add(id);
        if (!this.greeted) {
          this.greeted = true;
          this.handler.onGreeted(this);
        }
        return;
      case 'org.active':
        this.organizations.add(frame.organization_id);
        return;
      case 'mesh.orgDeleted':
        this.organizations.delete(frame.organization_id);
        return;
      default:
        return this.handler.onRequest(this, frame);
    }
  }

  private settle(id: number, frame: Reply): void {
    // A reply after its timeout is a race, not abuse: nobody waits for it any more.
    const waiting = this.pending.get(id);
    if (!waiting) return;
    this.pending.delete(id);
    waiting.resolve(frame);
  }

  private closedWith(code: number, reason: string): void {
    if (this.closed) return;
    this.closed = true;
    clearInterval(this.heartbeat);
    this.alive();
    if (this.sweeper) clearTimeout(this.sweeper);
    for (const [id, waiting] of this.pending) {
      this.pending.delete(id);
      waiting.resolve(undefined);
    }
    this.handler.onClose(this, code, reason || this.dropReason || '');
  }
}
