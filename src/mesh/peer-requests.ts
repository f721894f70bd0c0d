import type { Logger } from '../logging/logger.js';
import { IpcError, type DeliveredEnvelope, type EnvelopeMeta } from '../ipc/envelope.js';
import type { RequestResult } from '../ipc/handlers.js';
import type { TargetPlan } from '../ipc/targets.js';
import type { FrameOf } from './frames.js';
import type { PeerLink } from './link.js';

export type MeshHandler = (data: unknown, from: { server: string }) => unknown | Promise<unknown>;
export type RouteFromPeer = (envelope: unknown, options: { meta: EnvelopeMeta; wantReplies: boolean; timeoutMs: number; fromPeer: true }) => Promise<RequestResult>;
type Outcome = Omit<RequestResult, 'id'>;

/** Message ids seen lately, so an envelope that reaches this server twice is acted on once. */
export class RecentIds {
  private readonly ids = new Map<string, number>();

  constructor(
    private readonly ttlMs = 120_000,
    private readonly maxEntries = 100_000,
  ) {}

  /** False when `id` was seen within the ttl. */
  add(id: string, now = Date.now()): boolean {
    const seenAt = this.ids.get(id);
    if (seenAt !== undefined && now - seenAt < this.ttlMs) return false;
    this.ids.delete(id);
    this.ids.set(id, now);
    // Insertion order is age order: the oldest entries are first.
    for (const [oldest, at] of this.ids) {
      if (this.ids.size <= this.maxEntries && now - at < this.ttlMs) break;
      this.ids.delete(oldest);
    }
    return true;
  }
}

/** The part of `timeoutMs` a peer gets for its own targets, leaving time for its replies to travel back. */
export const peerTimeoutMs = (timeoutMs: number) => Math.max(1, timeoutMs - Math.min(250, Math.floor(timeoutMs / 4)));

/** The ready links an envelope goes to (SPEC 5.2 across servers) and the named servers that cannot be reached. */
export function selectLinks(links: Iterable<PeerLink>, cluster: string, to: NonNullable<TargetPlan['forward']>, organizationId: string | undefined): { links: PeerLink[]; missing: string[] } {
  const open = [...links].filter((link) => link.ready);
  if (to.servers) {
    const byPeer = new Map(open.map((link) => [link.peer, link]));
    const chosen: PeerLink[] = [];
    const missing: string[] = [];
    for (const server of new Set(to.servers)) {
      const link = byPeer.get(server);
      if (link) chosen.push(link);
      else missing.push(server);
    }
    return { links: chosen, missing };
  }
  // Peers are all of this cluster group (the handshake checks it): a cluster list includes them all or none.
  const candidates = to.clusters && !to.clusters.includes(cluster) ? [] : open;
  // An organization is a scope: only peers that advertise it get the envelope.
  return { links: organizationId === undefined ? candidates : candidates.filter((link) => link.organizations.has(organizationId)), missing: [] };
}

/** Sends an envelope over each chosen link and merges the peers' replies; a silent peer is missing as `{ server }`. */
export async function forwardOverLinks(chosen: PeerLink[], missingServers: string[], envelope: DeliveredEnvelope, wantReplies: boolean, timeoutMs: number, log: Logger): Promise<Outcome> {
  const { meta, ...body } = envelope;
  const frame = { type: 'envelope', envelope: body, meta, timeoutMs: peerTimeoutMs(timeoutMs) } as const;
  const outcome: Outcome = { replies: [], missing: missingServers.map((server) => ({ server })) };
  if (missingServers.length > 0) log.warn({ servers: missingServers, trace: meta.id }, 'no mesh link to these servers: envelope not delivered there');
  if (!wantReplies) {
    for (const link of chosen) {
      try {
        link.send(frame);
      } catch (error) {
        log.warn({ err: error, peer: link.peer, trace: meta.id }, 'envelope not forwarded to a peer');
      }
    }
    return outcome;
  }
  const settled = await Promise.all(
    chosen.map(async (link): Promise<Outcome> => {
      try {
        const reply = await link.call(frame, timeoutMs);
        // A peer answers for its own processes only (it never forwards): anything else is dropped.
        if (reply?.type === 'replies' && !reply.error) return { replies: reply.replies.filter((entry) => entry.server === link.peer), missing: reply.missing.filter((entry) => entry.server === link.peer) };
        if (reply) log.warn({ peer: link.peer, trace: meta.id, error: reply.type === 'error' ? reply.message : reply.error }, 'a peer refused a forwarded envelope');
      } catch (error) {
        log.warn({ err: error, peer: link.peer, trace: meta.id }, 'envelope not forwarded to a peer');
      }
      return { replies: [], missing: [{ server: link.peer }] };
    }),
  );
  for (const part of settled) {
    outcome.replies.push(...part.replies);
    outcome.missing.push(...part.missing);
  }
  return outcome;
}

/** Routes an envelope a peer forwarded: once, never onwards, with the sender's metadata. */
export function answerEnvelope(link: PeerLink, frame: FrameOf<'envelope'>, self: string, recent: RecentIds, route: RouteFromPeer, log: Logger): void {
  const { id, meta } = frame;
  // One hop, straight from the origin: a peer cannot speak for another server.
  if (meta.origin.server !== link.peer) return link.refuse('bad_origin', `origin ${meta.origin.server} is not the linked peer ${link.peer}`, id);
  if (!recent.add(meta.id)) return link.refuse('duplicate', `envelope ${meta.id} was already delivered`, id);
  route(frame.envelope, { meta, wantReplies: id !== undefined, timeoutMs: frame.timeoutMs, fromPeer: true }).then(
    (result) => {
      if (id === undefined) return;
      try {
        link.send({ type: 'replies', id, replies: result.replies, missing: result.missing });
      } catch (error) {
        log.warn({ err: error, peer: link.peer, trace: meta.id }, 'replies not sent back to a peer');
        const code = (error as { code?: string }).code ?? 'unavailable';
        try {
          link.send({ type: 'replies', id, replies: [], missing: [{ server: self }], error: { code, message: (error as Error).message } });
        } catch {
          // the link is gone or full: the peer's wait ends with its timeout
        }
      }
    },
    (error: unknown) => {
      if (error instanceof IpcError) return link.refuse(error.code, error.message, id);
      log.error({ err: error, peer: link.peer, trace: meta.id }, 'routing an envelope from a peer failed');
      if (id !== undefined) link.refuse('handler_failed', 'routing failed', id);
    },
  );
}

/** Emits a `mesh.*` call no handler answers on the server object; answers how many listeners heard it. */
export interface MeshEventDelivery {
  deliver(method: string, data: unknown, from: { server: string }): number;
}

/**
 * Runs a `mesh.*` handler for a peer; without one, the call is emitted as an event to the listeners of its
 * method. No handler and no listener, or a failing handler, answers with an error.
 */
export async function answerCall(link: PeerLink, frame: FrameOf<'call'>, handlers: ReadonlyMap<string, MeshHandler>, log: Logger, events?: MeshEventDelivery): Promise<void> {
  const handler = handlers.get(frame.method);
  let reply: FrameOf<'result'>;
  if (!handler) {
    const listeners = events?.deliver(frame.method, frame.data, { server: link.peer }) ?? 0;
    reply =
      listeners > 0
        ? { type: 'result', id: frame.id, ok: true, result: { event: frame.method, listeners } }
        : { type: 'result', id: frame.id, ok: false, error: { code: 'unknown_method', message: `no mesh handler for "${frame.method}"` } };
  } else {
    try {
      const result = await handler(frame.data, { server: link.peer });
      reply = { type: 'result', id: frame.id, ok: true, result: result === undefined ? null : result };
    } catch (error) {
      reply = { type: 'result', id: frame.id, ok: false, error: { code: 'handler_failed', message: error instanceof Error ? error.message : String(error) } };
    }
  }
  try {
    link.send(reply);
  } catch (error) {
    log.warn({ err: error, peer: link.peer, method: frame.method }, 'mesh reply not sent');
    try {
      link.send({ type: 'result', id: frame.id, ok: false, error: { code: (error as { code?: string }).code ?? 'handler_failed', message: (error as Error).message } });
    } catch {
      // gone or full: the caller's wait ends with its timeout
    }
  }
}
