/** SPEC 3.1 worker status. Only `ready` takes new connections. */
export const WORKER_STATUSES = ['starting', 'ready', 'cordoned', 'draining', 'stopping', 'stopped'] as const;
export type WorkerStatus = (typeof WORKER_STATUSES)[number];

export type ServerStatus = 'starting' | 'ready' | 'degraded' | 'fallback' | 'stopping' | 'stopped';

export const acceptsTraffic = (status: WorkerStatus) => status === 'ready';
