import type { Beat } from '../heartbeat.js';

export interface HealthPolicy {
  maxRssMb: number;
  maxEventLoopLagMs: number;
  lagRecycleBeats: number;
  lagSpikeMs: number;
  wedgedTimeoutMs: number;
}

export type RecycleVerdict = { recycle: false } | { recycle: true; reason: 'rss' | 'lag'; detail: string };

/** Per-worker memory of consecutive laggy beats. */
export interface BeatHistory {
  laggyBeats: number;
}

/** The opt-in recycle policies on one heartbeat (0 disables each). Pure: the caller keeps `history`. */
export function judgeBeat(policy: HealthPolicy, history: BeatHistory, beat: Beat): RecycleVerdict {
  if (policy.maxRssMb > 0 && beat.rss > policy.maxRssMb * 1024 * 1024) {
    return { recycle: true, reason: 'rss', detail: `rss ${Math.round(beat.rss / 1048576)} MiB > ${policy.maxRssMb} MiB` };
  }
  if (policy.lagSpikeMs > 0 && beat.lagMs > policy.lagSpikeMs) {
    return { recycle: true, reason: 'lag', detail: `lag spike ${Math.round(beat.lagMs)} ms > ${policy.lagSpikeMs} ms` };
  }
  if (policy.maxEventLoopLagMs > 0) {
    history.laggyBeats = beat.lagMs > policy.maxEventLoopLagMs ? history.laggyBeats + 1 : 0;
    if (history.laggyBeats >= policy.lagRecycleBeats) {
      return { recycle: true, reason: 'lag', detail: `lag above ${policy.maxEventLoopLagMs} ms for ${history.laggyBeats} beats` };
    }
  }
  return { recycle: false };
}

/** Milliseconds a worker has been silent past the wedged timeout, or 0 when it is not wedged. */
export function wedgedFor(policy: HealthPolicy, lastBeatAt: number, now: number): number {
  if (policy.wedgedTimeoutMs <= 0) return 0;
  const silentMs = now - lastBeatAt;
  return silentMs >= policy.wedgedTimeoutMs ? silentMs : 0;
}
