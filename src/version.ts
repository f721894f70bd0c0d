import { packageFacts } from './package.js';

/**
 * This package's version, read when the process loads its code: a process reports the version it runs even
 * after a newer one was deployed beside it (which is what a hand-over then starts).
 */
export const FLEETPLANE_VERSION: string = packageFacts()?.version ?? 'unknown';
