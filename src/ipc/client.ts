import type { WorkerRuntime } from '../runtime/worker.js';
import { RpcRemoteError } from '../runtime/rpc.js';
import { IpcError, isIpcErrorCode, parseEnvelope, type DeliveredEnvelope } from './envelope.js';
import type { HandlerRegistry, RequestResult } from './handlers.js';
import { DELIVER, ROUTE_REQUEST, ROUTE_SEND, type DeliveryOutcome } from './messages.js';
import { DEFAULT_REQUEST_TIMEOUT_MS } from './router.js';

/**
 * The worker side of IPC: envelopes go to the primary, which routes them (a worker never guesses where
 * other processes are); envelopes delivered here run this process's handlers and answer.
 */
export class IpcClient {
  constructor(
    private readonly runtime: Pick<WorkerRuntime, 'rpc'>,
    private readonly handlers: HandlerRegistry,
    private readonly maxEnvelopeBytes: number,
  ) {
    runtime.rpc.handle(DELIVER, (params) => this.run((params as { envelope: DeliveredEnvelope }).envelope));
  }

  send(input: unknown): Promise<void> {
    // Validate here too, so the caller gets the error rather than the primary's log.
    parseEnvelope(input, this.maxEnvelopeBytes);
    this.runtime.rpc.notify(ROUTE_SEND, { envelope: input });
    return Promise.resolve();
  }

  /** An invalid envelope throws here, before anything is sent. */
  request(input: unknown, timeoutMs?: number): Promise<RequestResult> {
    const envelope = parseEnvelope(input, this.maxEnvelopeBytes);
    const budget = timeoutMs ?? envelope.timeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS;
    // The primary answers within `budget`; the margin only guards against the primary itself going away.
    return this.runtime.rpc.call(ROUTE_REQUEST, { envelope, timeoutMs: budget }, budget + 5_000).catch((error: unknown) => {
      if (!(error instanceof RpcRemoteError)) throw new IpcError('unavailable', 'the primary did not answer');
      throw new IpcError(isIpcErrorCode(error.code) ? error.code : 'handler_failed', error.message, error.field);
    });
  }

  private async run(envelope: DeliveredEnvelope): Promise<DeliveryOutcome> {
    const outcome = await this.handlers.run(envelope);
    return outcome.ok ? { ok: true, result: outcome.result } : { ok: false, error: outcome.error };
  }
}
