import type { WorkerRuntime } from '../runtime/worker.js';
import { IpcError, parseEnvelope, type DeliveredEnvelope } from './envelope.js';
import type { HandlerRegistry, RequestResult } from './handlers.js';
import { IPC_CHANNEL, type PrimaryIpcMessage, type WorkerIpcMessage } from './messages.js';
import { DEFAULT_REQUEST_TIMEOUT_MS } from './router.js';

/**
 * The worker side of IPC: envelopes go to the primary, which routes them (a worker never guesses where
 * other processes are); envelopes delivered here run this process's handlers and answer.
 */
export class IpcClient {
  private nextRequest = 1;
  private readonly waiting = new Map<number, { resolve(result: RequestResult): void; reject(error: Error): void }>();

  constructor(
    private readonly runtime: Pick<WorkerRuntime, 'onChannel' | 'sendChannel'>,
    private readonly handlers: HandlerRegistry,
    private readonly maxEnvelopeBytes: number,
  ) {
    runtime.onChannel(IPC_CHANNEL, (payload) => this.receive(payload as PrimaryIpcMessage));
  }

  send(input: unknown): Promise<void> {
    // Validate here too, so the caller gets the error rather than the primary's log.
    parseEnvelope(input, this.maxEnvelopeBytes);
    this.post({ kind: 'send', envelope: input });
    return Promise.resolve();
  }

  request(input: unknown, timeoutMs?: number): Promise<RequestResult> {
    const envelope = parseEnvelope(input, this.maxEnvelopeBytes);
    const requestId = this.nextRequest++;
    const budget = timeoutMs ?? envelope.timeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS;
    return new Promise((resolve, reject) => {
      // The primary answers within `budget`; this only guards against the primary itself going away.
      const timer = setTimeout(() => {
        this.waiting.delete(requestId);
        reject(new IpcError('unavailable', 'the primary did not answer'));
      }, budget + 5_000);
      timer.unref();
      this.waiting.set(requestId, {
        resolve: (result) => {
          clearTimeout(timer);
          resolve(result);
        },
        reject: (error) => {
          clearTimeout(timer);
          reject(error);
        },
      });
      this.post({ kind: 'send', envelope, requestId, timeoutMs: budget });
    });
  }

  private post(message: WorkerIpcMessage): void {
    this.runtime.sendChannel(IPC_CHANNEL, message);
  }

  private receive(message: PrimaryIpcMessage): void {
    if (message.kind === 'replies') {
      const waiter = this.waiting.get(message.requestId);
      if (!waiter) return;
      this.waiting.delete(message.requestId);
      if (message.ok) waiter.resolve(message.result);
      else waiter.reject(new IpcError(message.error.code as IpcError['code'], message.error.message, message.error.field));
      return;
    }
    if (message.kind === 'deliver') void this.run(message.deliveryId, message.envelope);
  }

  private async run(deliveryId: number, envelope: DeliveredEnvelope): Promise<void> {
    const outcome = await this.handlers.run(envelope);
    if (deliveryId === 0) return;
    this.post(outcome.ok ? { kind: 'result', deliveryId, ok: true, result: outcome.result } : { kind: 'result', deliveryId, ok: false, error: outcome.error });
  }
}
