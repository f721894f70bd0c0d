import type { TargetReply } from './handlers.js';

/**
 * The requests an envelope makes between the primary and its workers (declared with their parameters in
 * `src/runtime/protocol.ts`): a worker's envelope goes to its primary, which routes it; the primary delivers
 * an envelope to each worker it targets, which answers with its handler's outcome.
 */
export const ROUTE_SEND = 'primary.ipc.send';
export const ROUTE_REQUEST = 'primary.ipc.request';
export const DELIVER = 'worker.ipc.deliver';

/** A worker's answer to a delivery (checked where it arrives, as `WORKER_RESULTS` declares it). */
export type DeliveryOutcome = Pick<TargetReply, 'ok' | 'result' | 'error'>;
