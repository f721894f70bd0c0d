/** SPEC 3.1 worker status. Only `ready` takes new connections. */
export const WORKER_STATUSES = ['starting', 'ready', 'cordoned', 'draining', 'stopping', 'stopped'] as const;
export type WorkerStatus = (typeof WORKER_STATUSES)[number];

/** Why a worker is replaced (SPEC 1.5, 1.6): its age, memory, silence or lag, or a rolling restart. */
export const RECYCLE_REASONS = ['maxAge', 'rss', 'wedged', 'lag', 'restart'] as const;
export type RecycleReason = (typeof RECYCLE_REASONS)[number];

export type ServerStatus = 'starting' | 'ready' | 'degraded' | 'fallback' | 'stopping' | 'stopped';

export const acceptsTraffic = (status: WorkerStatus) => status === 'ready';
