import { SafeEmitter } from '../events/safe-emitter.js';
import type { IncomingMessage } from 'node:http';
import type WebSocket from 'ws';
import type { Logger } from '../logging/logger.js';
import type { ResolvedConfig } from '../config/schema.js';
import type { DeliveredEnvelope } from '../ipc/envelope.js';
import type { PeerForwarder } from '../ipc/router.js';
import type { TargetPlan } from '../ipc/targets.js';
import { MeshError } from './errors.js';
import { ListenError } from '../runtime/listeners.js';
import { MESH_METHOD, type FrameOf } from './frames.js';
import { checkMeshMessage, type MeshApi, type MeshMessage, type MeshReply, type PeerInfo } from './api.js';
import { NonceCache, acceptHeaders, verifyDial, type DialClaim } from './handshake.js';
import { PeerLink, type Corkable, type LinkHandler } from './link.js';
import { MeshListener, type UpgradeVerdict } from './listener.js';
import { PeerDialer, type PeerTarget } from './dialer.js';
import { RecentIds, answerCall, answerEnvelope, forwardOverLinks, selectLinks, type MeshEventDelivery, type MeshHandler, type RouteFromPeer } from './peer-requests.js';
import { peerCertificateOf, type MeshSettings, type MeshTls, type PeerCertificateCheck } from './settings.js';
import { DiscoveryLoop } from './discovery.js';
import type { MeshEvents } from './events.js';

export type { MeshApi, MeshEvents, MeshHandler, MeshMessage, MeshReply, PeerInfo };

export interface MeshDeps {
  serverId: string;
  cluster: string;
  config: ResolvedConfig['mesh'];
  settings: MeshSettings;
  log: Logger;
  /** The primary's router; envelopes from peers are routed with `fromPeer`, so never forwarded again. */
  route: RouteFromPeer;
  /** Organizations active on this server, advertised to every peer. */
  organizations(): string[];
  /** This server's public URL (the fallback target peers may use); known once the HTTP port is bound. */
  publicUrl(): string | undefined;
  /** The URL peers dial, for the mesh port bound (`mesh.url`, else this host and the port). */
  advertisedUrl(port: number): string;
  /** Running peers this server dials, from the inventory. */
  discover(): Promise<PeerTarget[]>;
  /** A value that changes when the inventory may have changed; polled between discoveries. */
  inventoryToken?(): Promise<string>;
  random?: () => number;
  /** Checks of a peer's certificate beyond TLS's own (`mesh.tls.mode: "auto"`), both ways. */
  peerCheck?: PeerCertificateCheck;
  /** Where a peer's `mesh.*` call with no handler goes: the listeners of its method on the server object. */
  events?: MeshEventDelivery;
}

/**
 * The primary's mesh (SPEC 6): a listener for peers that dial in, dialers for the peers this server dials,
 * and one authenticated link per pair. Implements the router's `PeerForwarder`. Events (for observability):
 * `link:open` (once the peer's hello arrived), `link:close`, `reconnect`, `giveup`, `refused`; a listener that
 * throws is logged and never reaches mesh code, and the listeners after it still run.
 */
export class Mesh extends SafeEmitter<MeshEvents> implements MeshApi, PeerForwarder {
  private readonly links = new Map<string, PeerLink>();
  /** The certificate each link's peer presented (`peerCheck` only), checked again when revocations change. */
  private readonly linkCertificates = new WeakMap<PeerLink, ReturnType<typeof peerCertificateOf>>();
  private readonly linkClosed = new Map<PeerLink, (code: number) => void>();
  private readonly dialers = new Map<string, PeerDialer>();
  private readonly handlers = new Map<string, MeshHandler>();
  private readonly nonces = new NonceCache();
  private readonly recent = new RecentIds();
  private readonly discovery: DiscoveryLoop;
  private listener: MeshListener<DialClaim> | undefined;
  private closing = false;
  private nextFallback = 0;
  #url: string | undefined;

  private readonly linkHandler: LinkHandler = {
    onRequest: (link, frame) => this.answer(link, frame),
    onClose: (link, code, reason) => this.linkDropped(link, code, reason),
    onGreeted: (link) => {
      this.deps.log.info({ peer: link.peer, direction: link.direction }, 'mesh link open');
      this.emitSafe('link:open', { peer: link.peer, direction: link.direction });
    },
  };

  /** The URL peers dial, once listening. */
  get url(): string | undefined {
    return this.#url;
  }

  constructor(private readonly deps: MeshDeps) {
    super((event, error) => deps.log.error({ err: error, event }, 'mesh event listener failed'));
    this.tls = deps.settings.tls;
    this.discovery = new DiscoveryLoop({
      intervalMs: deps.config.discoveryIntervalMs,
      discover: deps.discover,
      token: deps.inventoryToken,
      log: deps.log,
      found: (targets) => this.discovered(targets),
    });
  }

  get active(): boolean {
    return this.deps.settings.active;
  }

  /** The mesh's listening socket, for a hand-over (SPEC 1.10). */
  get listeningSocket(): { host: string; port: number; handle: unknown } | undefined {
    return this.listener?.socket;
  }
  /** The mutual-TLS material of the next handshakes, either way. */
  private tls: MeshTls | undefined;

  /**
   * Swaps the mutual-TLS material (a reload, a renewed certificate): the mesh port presents it from the next
   * handshake and dialers use it from their next dial. Links already open are not touched.
   */
  setTls(tls: MeshTls): void {
    this.tls = tls;
    this.listener?.setSecureContext(tls);
  }

  /**
   * Checks the certificate of every open link again (`mesh.tls.mode: "auto"`, when the cluster's revoked serials
   * changed): a link whose peer presented a certificate that fails the check now is closed; its peer dials again
   * with a certificate that passes, or is refused.
   */
  recheckLinks(): void {
    const check = this.deps.peerCheck;
    if (!check) return;
    for (const link of this.links.values()) {
      const problem = check(this.linkCertificates.get(link), link.peer);
      if (!problem) continue;
      this.deps.log.warn({ peer: link.peer, direction: link.direction, reason: problem }, 'mesh link closed: its certificate no longer passes');
      link.close(1008, 'certificate no longer valid');
    }
  }

  /** Binds the mesh port (when the mesh is on), or listens on the socket a hand-over passed; returns the port. */
  async listen(inherited?: unknown): Promise<number | undefined> {
    const { settings, config, log } = this.deps;
    if (!settings.active) {
      log.info({ reason: settings.why }, 'mesh off');
      return undefined;
    }
    this.listener = new MeshListener<DialClaim>({
      host: config.host,
      port: config.port,
      tls: settings.tls,
      maxPayload: settings.maxPayload,
      log,
      authorize: (request) => this.authorize(request),
      accepted: (ws, claim, socket) => {
        if (!this.adopt(ws, claim.server, 'in', socket)) ws.close(1008, 'already linked');
      },
      refused: (details) => this.emitSafe('refused', details),
    });
    try {
      const port = await this.listener.listen(inherited);
      this.#url = this.deps.advertisedUrl(port);
      return port;
    } catch (error) {
      // Said as a busy HTTP port is: one line naming the setting, no stack (the start fails with exit code 1).
      throw ListenError.of(`mesh.port ${config.port} on ${config.host}`, error as NodeJS.ErrnoException);
    }
  }

  /** Starts discovery: dial the peers of the inventory now, again on a timer and on inventory change. */
  join(): void {
    if (this.active && !this.closing) this.discovery.start();
  }

  /** Shutdown begins: no new links either way; existing ones keep carrying envelopes until `close`. */
  beginShutdown(): void {
    this.closing = true;
    this.discovery.stop();
    for (const dialer of this.dialers.values()) dialer.stop();
  }

  /** Closes every link with `code` (1000: this node is leaving; 1012: it restarts) and the mesh port. */
  close(code: number, reason = code === 1012 ? 'restarting' : 'shutting down'): void {
    this.beginShutdown();
    for (const link of this.links.values()) link.close(code, reason);
    this.listener?.close();
  }

  handle(method: string, handler: MeshHandler): void {
    if (!new RegExp(MESH_METHOD).test(method)) throw new TypeError(`mesh handlers are named "mesh.<name>", got "${method}"`);
    this.handlers.set(method, handler);
  }

  async send(message: MeshMessage): Promise<MeshReply> {
    checkMeshMessage(message);
    const link = this.links.get(message.server);
    if (!link?.ready) throw new MeshError('unavailable', `no mesh link to server "${message.server}"`);
    const reply = await link.call({ type: 'call', method: message.method, data: message.data }, message.timeoutMs ?? 5_000);
    if (!reply) throw new MeshError(link.open ? 'timeout' : 'unavailable', link.open ? `${message.method}: no reply from ${message.server} in time` : `the link to ${message.server} closed before it replied`);
    if (reply.type === 'error') return { server: message.server, ok: false, error: { code: reply.code, message: reply.message } };
    if (reply.type !== 'result') return { server: message.server, ok: false, error: { code: 'bad_reply', message: 'the peer answered with the wrong frame' } };
    return reply.ok ? { server: message.server, ok: true, result: reply.result } : { server: message.server, ok: false, error: reply.error ?? { code: 'error', message: 'failed' } };
  }

  async peers(): Promise<PeerInfo[]> {
    return [...this.links.values()]
      .filter((link) => link.ready)
      .map((link) => ({ server: link.peer, direction: link.direction, ...(link.publicUrl ? { publicUrl: link.publicUrl } : {}), organizations: [...link.organizations].sort() }))
      .sort((a, b) => (a.server < b.server ? -1 : 1));
  }

  /**
   * SPEC 1.3: the public URL of a running peer for the 307 fallback, rotating over the linked ones that answer
   * their pings: a peer cut off is not offered from its first ping left unanswered, before the pong timeout drops
   * its link.
   */
  peerUrl(): string | undefined {
    const urls = [...this.links.values()].filter((link) => link.ready && link.publicUrl && link.answering).map((link) => link.publicUrl!);
    if (urls.length === 0) return undefined;
    return urls[this.nextFallback++ % urls.length];
  }

  forward(envelope: DeliveredEnvelope, to: NonNullable<TargetPlan['forward']>, wantReplies: boolean, timeoutMs: number) {
    const { links, missing } = selectLinks(this.links.values(), this.deps.cluster, to, envelope.organization_id);
    return forwardOverLinks(links, missing, envelope, wantReplies, timeoutMs, this.deps.log);
  }

  /** Tells every peer this server now serves the organization. */
  organizationActive(organizationId: string): void {
    this.broadcast({ type: 'org.active', organization_id: organizationId });
  }

  /** SPEC 5.5: tells every peer the organization went inactive here (`mesh.orgDeleted`). */
  organizationInactive(organizationId: string): void {
    this.broadcast({ type: 'mesh.orgDeleted', organization_id: organizationId });
  }

  private broadcast(frame: FrameOf<'org.active'> | FrameOf<'mesh.orgDeleted'>): void {
    for (const link of this.links.values()) {
      if (!link.open) continue;
      try {
        link.send(frame);
      } catch (error) {
        this.deps.log.warn({ err: error, peer: link.peer, frame: frame.type }, 'organization notice not sent to a peer');
      }
    }
  }

  private authorize(request: IncomingMessage): UpgradeVerdict<DialClaim> {
    const { serverId: self, cluster, settings } = this.deps;
    if (this.closing) return { ok: false, status: 503, reason: 'this server is shutting down' };
    const check = verifyDial(request.headers, settings.secret);
    if (!check.ok) return { ok: false, status: check.status, reason: check.reason, peer: check.server };
    const { claim } = check;
    const peer = claim.server;
    if (!this.nonces.remember(claim.nonce, claim.timestamp)) return { ok: false, status: 401, reason: 'replayed handshake', peer };
    if (claim.cluster !== cluster) return { ok: false, status: 403, reason: `peer is in cluster group "${claim.cluster}"`, peer };
    if (claim.to !== self) return { ok: false, status: 403, reason: `handshake is addressed to "${claim.to}"`, peer };
    if (peer === self) return { ok: false, status: 403, reason: "peer claims this server's id", peer };
    if (peer < self) return { ok: false, status: 403, reason: 'the server with the larger id dials: this pair is linked the other way', peer };
    const certificateProblem = this.deps.peerCheck?.(peerCertificateOf(request.socket), peer);
    if (certificateProblem) return { ok: false, status: 403, reason: certificateProblem, peer };
    const existing = this.links.get(peer);
    if (existing?.open) {
      // A peer that restarted may dial before this side noticed the old link died: check it now.
      existing.probe();
      return { ok: false, status: 409, reason: 'this server id is already linked', peer };
    }
    return { ok: true, value: claim, headers: acceptHeaders(self, claim, settings.secret) };
  }

  private adopt(ws: WebSocket, peer: string, direction: 'in' | 'out', socket: Corkable | undefined, onClose?: (code: number) => void): boolean {
    if (this.closing || this.links.get(peer)?.open) return false;
    const { config, log } = this.deps;
    const link = new PeerLink(
      ws,
      { peer, direction, socket, maxBufferedBytes: config.maxBufferedBytes, maxFrameBytes: config.maxFrameBytes, pingIntervalMs: config.pingIntervalMs, pongTimeoutMs: config.pongTimeoutMs, log },
      this.linkHandler,
    );
    this.links.set(peer, link);
    if (this.deps.peerCheck) this.linkCertificates.set(link, peerCertificateOf(socket));
    if (onClose) this.linkClosed.set(link, onClose);
    try {
      const url = this.deps.publicUrl();
      link.send({ type: 'hello', publicUrl: url && /^https?:\/\//.test(url) && url.length <= 2048 ? url : undefined, organizations: this.deps.organizations() });
    } catch (error) {
      log.warn({ err: error, peer }, 'hello not sent to a peer');
    }
    return true;
  }

  private linkDropped(link: PeerLink, code: number, reason: string): void {
    if (this.links.get(link.peer) === link) this.links.delete(link.peer);
    this.deps.log.info({ peer: link.peer, direction: link.direction, code, reason }, 'mesh link closed');
    this.emitSafe('link:close', { peer: link.peer, direction: link.direction, code, reason });
    const onClose = this.linkClosed.get(link);
    this.linkClosed.delete(link);
    onClose?.(code);
  }

  private answer(link: PeerLink, frame: FrameOf<'envelope'> | FrameOf<'call'>): void {
    if (frame.type === 'envelope') answerEnvelope(link, frame, this.deps.serverId, this.recent, this.deps.route, this.deps.log);
    else void answerCall(link, frame, this.handlers, this.deps.log, this.deps.events);
  }

  private discovered(targets: PeerTarget[]): void {
    if (this.closing) return;
    const { serverId, cluster, settings, log } = this.deps;
    const listed = new Set<string>();
    for (const target of targets) {
      listed.add(target.id);
      const dialer = this.dialers.get(target.id);
      if (dialer) {
        dialer.rediscovered(target);
        continue;
      }
      const created = new PeerDialer(target, {
        self: serverId,
        cluster,
        secret: settings.secret,
        tls: () => this.tls,
        peerCheck: this.deps.peerCheck,
        schedule: settings.schedule,
        maxPayload: settings.maxPayload,
        random: this.deps.random ?? Math.random,
        log,
        adopt: (ws, peer, socket, onClose) => this.adopt(ws, peer.id, 'out', socket, onClose),
        notify: (event, ...payload) => this.emitSafe(event, ...payload),
      });
      this.dialers.set(target.id, created);
      created.start();
    }
    // Dialers with nothing left to do and no inventory entry are forgotten; retrying ones finish their budget.
    for (const [peer, dialer] of this.dialers) if (!listed.has(peer) && dialer.idle) this.dialers.delete(peer);
  }
}
