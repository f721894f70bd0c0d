import { randomUUID } from 'node:crypto';
import type { Logger } from '../logging/logger.js';
import type { WorkerEndpoint } from '../runtime/channels.js';
import { IpcError, parseEnvelope, type DeliveredEnvelope, type EnvelopeMeta, type IpcEnvelope } from './envelope.js';
import { noSuchWorker, resolveTargets, type TargetPlan, type TargetView } from './targets.js';
import type { HandlerRegistry, RequestResult, TargetReply } from './handlers.js';
import { DELIVER, ROUTE_REQUEST, ROUTE_SEND } from './messages.js';

export const DEFAULT_REQUEST_TIMEOUT_MS = 5_000;

/** How envelopes reach other servers; the mesh provides one. */
export interface PeerForwarder {
  forward(envelope: DeliveredEnvelope, to: NonNullable<TargetPlan['forward']>, wantReplies: boolean, timeoutMs: number): Promise<Omit<RequestResult, 'id'>>;
}

export interface RouterDeps {
  serverId: string;
  cluster: string;
  handlers: HandlerRegistry;
  log: Logger;
  /** Workers that take envelopes now. */
  view(): TargetView;
  endpointOf(workerId: number): WorkerEndpoint | undefined;
  maxEnvelopeBytes: number;
  forwarder?: PeerForwarder;
  /** Where the router answers its workers' requests (`primary.ipc.*`), given the worker that asked. */
  answerWorkers(method: typeof ROUTE_SEND | typeof ROUTE_REQUEST, handler: (params: unknown, from: WorkerEndpoint) => unknown): void;
}

/**
 * The primary routes every envelope of its server: from its own code, from workers (over the `ipc`
 * channel) and from peers. Each target process gets the envelope once; replies are gathered per target and
 * targets that do not answer in time (or exit first) are reported missing.
 */
export class IpcRouter {
  constructor(private readonly deps: RouterDeps) {
    // The parameters were checked by the protocol; the envelope is checked by `route`, with SPEC 5's errors.
    deps.answerWorkers(ROUTE_SEND, (params, from) => {
      void this.route((params as { envelope: unknown }).envelope, { origin: this.originOf(from), wantReplies: false }).catch(() => {});
    });
    deps.answerWorkers(ROUTE_REQUEST, (params, from) => {
      const { envelope, timeoutMs } = params as { envelope: unknown; timeoutMs: number };
      return this.route(envelope, { origin: this.originOf(from), wantReplies: true, timeoutMs }).catch((error: unknown) => {
        if (error instanceof IpcError) throw error;
        this.deps.log.error({ err: error }, 'routing an envelope failed');
        throw new IpcError('handler_failed', 'routing failed');
      });
    });
  }

  private originOf(from: WorkerEndpoint): EnvelopeMeta['origin'] {
    return { server: this.deps.serverId, worker: from.workerId };
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
    // One it does not have at all is said so, with the ones it has: waiting longer would not help.
    if (plan.unknown) result.unknownWorkers = plan.unknown.map((worker) => ({ server: this.deps.serverId, worker, message: noSuchWorker(worker, view) }));
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

  /**
   * A target that does not answer in time, exits first, or answers what is not an outcome (checked on arrival by
   * the protocol, which tells the refusal in the primary's rate-limited line) is missing.
   */
  private async deliver(endpoint: WorkerEndpoint | undefined, workerId: number, envelope: DeliveredEnvelope, wantReply: boolean, timeoutMs: number): Promise<TargetReply | { missing: number }> {
    if (!endpoint) return { missing: workerId };
    if (!wantReply) {
      endpoint.rpc.notify(DELIVER, { envelope });
      return { missing: workerId };
    }
    try {
      const outcome = await endpoint.rpc.call(DELIVER, { envelope }, timeoutMs);
      return { server: this.deps.serverId, worker: workerId, ok: outcome.ok, result: outcome.result, error: outcome.error };
    } catch {
      return { missing: workerId };
    }
  }

  private async forward(envelope: DeliveredEnvelope, to: NonNullable<TargetPlan['forward']>, wantReplies: boolean, timeoutMs: number): Promise<Omit<RequestResult, 'id'>> {
    const forwarder = this.deps.forwarder;
    if (forwarder) return forwarder.forward({ ...envelope, meta: { ...envelope.meta, hops: envelope.meta.hops + 1 } }, to, wantReplies, timeoutMs);
    // Without a mesh, servers named explicitly cannot be reached: say so instead of dropping them silently.
    return { replies: [], missing: (to.servers ?? []).map((server) => ({ server })) };
  }
}

export type { IpcEnvelope };
