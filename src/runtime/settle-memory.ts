import { performance, type EventLoopUtilization } from 'node:perf_hooks';
import v8 from 'node:v8';
import type { Clock } from './clock.js';

/**
 * Why a worker settles its memory itself: starting takes a lot of short-lived memory (modules, compiled schemas),
 * which grows V8's young generation to its maximum, and an idle process keeps it. V8's memory reducer gives it
 * back on its own only some 16 s after the start (it waits for a quiet period measured from its last check).
 * A worker that has been quiet for `QUIET_FOR_MS` asks for one full collection: with the allocation rate low,
 * V8 shrinks the young generation and releases what it no longer uses. A shrunk young generation grows again
 * under load, so a worker is judged over a whole window, not an instant, as the memory reducer does.
 */
/** How long a worker must have been quiet, from its ready on, before it collects. */
export const QUIET_FOR_MS = 6_000;
/** How often the event loop is sampled: the quiet window slides by this much. */
export const LOOK_EVERY_MS = 2_000;
/** The share of the event loop's time in use, over the window, below which the worker counts as quiet. */
export const QUIET_UTILIZATION = 0.05;
/** Looks at most (about 45 s from ready); then the memory reducer is left to its own schedule. */
const MAX_LOOKS = 22;
/** The young generation's reserve once given back: V8's smallest, 2 × 0.5 MiB (measured 1 MiB). */
const SETTLED_YOUNG_BYTES = 2 * 1024 * 1024;

/** One full collection; true once the young generation is back to its smallest reserve. */
export type Collector = () => boolean;

function youngGenerationBytes(): number {
  return v8.getHeapSpaceStatistics().find((space) => space.space_name === 'new_space')?.space_size ?? 0;
}

/**
 * The collector the worker's own `--expose-gc` flag made, taken from the global scope so that no application
 * code calls it: V8 makes the global `gc` undeletable but writable, so it is left `undefined`. Left in place when
 * the operator asked for it too (`workers.execArgv`).
 */
export function takeCollector(keepGlobal: boolean, scope: { gc?: unknown } = globalThis): Collector | undefined {
  const gc = scope.gc;
  if (typeof gc !== 'function') return undefined;
  if (!keepGlobal) scope.gc = undefined;
  return () => {
    gc();
    // V8 shrinks it in a collection only when it judges the allocation rate low, which it measures between
    // collections: a collection that found it otherwise is followed by another at a later quiet look.
    return youngGenerationBytes() <= SETTLED_YOUNG_BYTES;
  };
}

export interface SettleOptions {
  collect: Collector;
  clock: Clock;
  /** The event loop's utilization since the previous call (0–1); default: Node's own measure. */
  utilization?: () => number;
  everyMs?: number;
  quietForMs?: number;
}

/** The event loop's utilization over each period between calls (the first: since the process started). */
function loopUtilization(): () => number {
  let previous: EventLoopUtilization | undefined;
  return () => {
    const current = performance.eventLoopUtilization();
    const period = previous ? performance.eventLoopUtilization(current, previous) : current;
    previous = current;
    return period.utilization;
  };
}

/**
 * Samples the event loop every `everyMs` from its start on; once `quietForMs` have passed, a look whose last
 * `quietForMs` were quiet collects, until a collection has settled the young generation. A busy worker is using
 * its young generation and is left as it is. At most `MAX_LOOKS` samples. Returns the function that stops it
 * (shutdown).
 */
export function settleWhenQuiet(options: SettleOptions): () => void {
  const everyMs = options.everyMs ?? LOOK_EVERY_MS;
  const windowSize = Math.max(1, Math.round((options.quietForMs ?? QUIET_FOR_MS) / everyMs));
  const utilization = options.utilization ?? loopUtilization();
  // The first period starts now, not at the process's start (its start is the busiest part).
  utilization();
  const periods: number[] = [];
  let looks = 0;
  let cancel: (() => void) | undefined;
  const look = () => {
    looks += 1;
    periods.push(utilization());
    if (periods.length > windowSize) periods.shift();
    const quiet = periods.length === windowSize && periods.reduce((sum, share) => sum + share, 0) / windowSize < QUIET_UTILIZATION;
    const settled = quiet && options.collect();
    cancel = !settled && looks < MAX_LOOKS ? options.clock.setTimeout(look, everyMs) : undefined;
  };
  cancel = options.clock.setTimeout(look, everyMs);
  return () => {
    cancel?.();
    cancel = undefined;
  };
}
