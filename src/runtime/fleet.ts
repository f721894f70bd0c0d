/** The supervised workers live in `./fleet/`; this path keeps serving the types callers import from it. */
export type { RestartWorkersOptions, WorkerRecord } from './fleet/fleet.js';
