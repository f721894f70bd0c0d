import { randomUUID } from 'node:crypto';
import type { Logger } from '../logging/logger.js';
import type { PrimaryChannels, WorkerEndpoint } from '../runtime/channels.js';
import { IpcError, parseEnvelope, type DeliveredEnvelope, type EnvelopeMeta, type IpcEnvelope } from './envelope.js';
import { resolveTargets, type TargetPlan, type TargetView } from './targets.js';
import type { HandlerRegistry, RequestResult, TargetReply } from './handlers.js';
import { IPC_CHANNEL, isWorkerIpcMessage, type PrimaryIpcMessage } from './messages.js';

export const DEFAULT_REQUEST_TIMEOUT_MS = 5_000;

/** How envelopes reach other servers; the mesh provides one. */
export interface PeerForwarder {
  forward(envelope: DeliveredEnvelope, to: NonNullable<TargetPlan['forward']>, wantReplies: boolean, timeoutMs: number): Promise<Omit<RequestResult, 'id'>>;
}

export interface RouterDeps {
  serverId: string;
  cluster: string;
  channels: PrimaryChannels;
  handlers: HandlerRegistry;
  log: Logger;
  /** Workers that take envelopes now. */
  view(): TargetView;
  endpointOf(workerId: number): WorkerEndpoint | undefined;
  maxEnvelopeBytes: number;
  forwarder?: PeerForwarder;
}

interface PendingDelivery {
  resolve(reply: TargetReply | undefined): void;
  endpoint: WorkerEndpoint;
}

/**
 * The primary routes every envelope of its server: from its own code, from workers (over the `ipc`
 * channel) and from peers. Each target process gets the envelope once; replies are gathered per target and
 * targets that do not answer in time (or exit first) are reported missing.
 */
export class IpcRouter {
  private nextDelivery = 1;
  private readonly pending = new Map<number, PendingDelivery>();

  constructor(private readonly deps: RouterDeps) {
    deps.channels.on(IPC_CHANNEL, (from, payload) => this.fromWorker(from, payload));
    deps.channels.onDisconnect((endpoint) => {
      for (const [id, delivery] of this.pending) {
        if (delivery.endpoint === endpoint) {
          this.pending.delete(id);
          delivery.resolve(undefined);
        }
      }
    });
  }

  set forwarder(forwarder: PeerForwarder | undefined) {
    this.deps.forwarder = forwarder;
  }

  /** Validates, routes and (when `wantReplies`) gathers replies. `meta` is set for envelopes from elsewhere. */
  async route(input: unknown, options: { origin?: EnvelopeMeta['origin']; meta?: EnvelopeMeta; wantReplies: boolean; timeoutMs?: number; fromPeer?: boolean }): Promise<RequestResult> {
    const envelope = parseEnvelope(input, this.deps.maxEnvelopeBytes);
    const meta: EnvelopeMeta = options.meta ?? { id: randomUUID(), origin: options.origin ?? { server: this.deps.serverId, worker: 0 }, hops: 0 };
    const delivered: DeliveredEnvelope = { ...envelope, meta };
    const view = this.deps.view();
    const plan = resolveTargets(envelope, view, options.fromPeer ?? false);
    const timeoutMs = Math.min(options.timeoutMs ?? envelope.timeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS, 120_000);

    const local: Array<Promise<TargetReply | { missing: number }>> = [];
    if (plan.master) local.push(this.runHere(delivered));
    for (const workerId of plan.workers) local.push(this.deliver(this.deps.endpointOf(workerId), workerId, delivered, options.wantReplies, timeoutMs));
    const peers = plan.forward ? this.forward(delivered, plan.forward, options.wantReplies, timeoutMs) : undefined;

    if (!options.wantReplies) {
      void Promise.all(local).catch(() => {});
      void peers?.catch((error) => this.deps.log.warn({ err: error, trace: meta.id }, 'forwarding to peers failed'));
      return { id: meta.id, replies: [], missing: [] };
    }
    const settled = await Promise.all(local);
    const result: RequestResult = { id: meta.id, replies: [], missing: [] };
    for (const outcome of settled) {
      if ('missing' in outcome) result.missing.push({ server: this.deps.serverId, worker: outcome.missing });
      else result.replies.push(outcome);
    }
    // A target that cannot answer is missing, not silently dropped: the caller asked for it by number.
    for (const workerId of plan.absent ?? []) result.missing.push({ server: this.deps.serverId, worker: workerId });
    if (peers) {
      const remote = await peers;
      result.replies.push(...remote.replies);
      result.missing.push(...remote.missing);
    }
    return result;
  }

  private async runHere(envelope: DeliveredEnvelope): Promise<TargetReply> {
    const outcome = await this.deps.handlers.run(envelope);
    if (!outcome.ok) return { server: this.deps.serverId, worker: 0, ...outcome };
    // A worker's reply crosses a process boundary as JSON; give the primary's the same shape.
    try {
      return { server: this.deps.serverId, worker: 0, ok: true, result: JSON.parse(JSON.stringify(outcome.result)) };
    } catch (error) {
      return { server: this.deps.serverId, worker: 0, ok: false, error: { code: 'handler_failed', message: `reply is not JSON: ${(error as Error).message}` } };
    }
  }

  private deliver(endpoint: WorkerEndpoint | undefined, workerId: number, envelope: DeliveredEnvelope, wantReply: boolean, timeoutMs: number): Promise<TargetReply | { missing: number }> {
    if (!endpoint) return Promise.resolve({ missing: workerId });
    if (!wantReply) {
      this.deps.channels.send(endpoint, IPC_CHANNEL, { kind: 'deliver', deliveryId: 0, envelope } satisfies PrimaryIpcMessage);
      return Promise.resolve({ missing: workerId });
    }
    const deliveryId = this.nextDelivery++;
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.pending.delete(deliveryId);
        resolve({ missing: workerId });
      }, timeoutMs);
      timer.unref();
      this.pending.set(deliveryId, {
        endpoint,
        resolve: (reply) => {
          clearTimeout(timer);
          resolve(reply ?? { missing: workerId });
        },
      });
      if (!this.deps.channels.send(endpoint, IPC_CHANNEL, { kind: 'deliver', deliveryId, envelope } satisfies PrimaryIpcMessage)) {
        this.pending.get(deliveryId)?.resolve(undefined);
        this.pending.delete(deliveryId);
      }
    });
  }

  private async forward(envelope: DeliveredEnvelope, to: NonNullable<TargetPlan['forward']>, wantReplies: boolean, timeoutMs: number): Promise<Omit<RequestResult, 'id'>> {
    const forwarder = this.deps.forwarder;
    if (forwarder) return forwarder.forward({ ...envelope, meta: { ...envelope.meta, hops: envelope.meta.hops + 1 } }, to, wantReplies, timeoutMs);
    // Without a mesh, servers named explicitly cannot be reached: say so instead of dropping them silently.
    return { replies: [], missing: (to.servers ?? []).map((server) => ({ server })) };
  }

  private fromWorker(from: WorkerEndpoint, payload: unknown): void {
    if (!isWorkerIpcMessage(payload)) {
      this.deps.channels.refuse(from, 'ipc', 'malformed ipc message');
      return;
    }
    if (payload.kind === 'result') {
      const delivery = this.pending.get(payload.deliveryId);
      if (!delivery || delivery.endpoint !== from) return;
      this.pending.delete(payload.deliveryId);
      delivery.resolve({ server: this.deps.serverId, worker: from.workerId, ok: payload.ok, result: payload.result, error: payload.error });
      return;
    }
    const origin = { server: this.deps.serverId, worker: from.workerId };
    this.route(payload.envelope, { origin, wantReplies: payload.requestId !== undefined, timeoutMs: payload.timeoutMs }).then(
      (result) => {
        if (payload.requestId !== undefined) this.deps.channels.send(from, IPC_CHANNEL, { kind: 'replies', requestId: payload.requestId, ok: true, result } satisfies PrimaryIpcMessage);
      },
      (error: unknown) => {
        if (payload.requestId === undefined) return;
        const failure = error instanceof IpcError ? { code: error.code, message: error.message, field: error.field } : { code: 'handler_failed', message: 'routing failed' };
        if (!(error instanceof IpcError)) this.deps.log.error({ err: error }, 'routing an envelope failed');
        this.deps.channels.send(from, IPC_CHANNEL, { kind: 'replies', requestId: payload.requestId, ok: false, error: failure } satisfies PrimaryIpcMessage);
      },
    );
  }
}

export type { IpcEnvelope };
