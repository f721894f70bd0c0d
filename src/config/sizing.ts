import { readFileSync } from 'node:fs';
import os from 'node:os';

/** CPU limit of this process's cgroup (v2 `cpu.max`, else v1 quota/period), or undefined when unlimited. */
export function cgroupCpuLimit(read: (file: string) => string = (file) => readFileSync(file, 'utf8')): number | undefined {
  try {
    const [quota, period] = read('/sys/fs/cgroup/cpu.max').trim().split(/\s+/);
    const limit = Number(quota) / Number(period);
    return quota !== 'max' && Number.isFinite(limit) && limit > 0 ? limit : undefined;
  } catch {
    // not cgroup v2: fall through to v1
  }
  try {
    const quota = Number(read('/sys/fs/cgroup/cpu/cpu.cfs_quota_us').trim());
    const period = Number(read('/sys/fs/cgroup/cpu/cpu.cfs_period_us').trim());
    return quota > 0 && period > 0 && Number.isFinite(quota / period) ? quota / period : undefined;
  } catch {
    return undefined;
  }
}

export interface WorkerCountDecision {
  count: number;
  warning?: string;
}

/**
 * `auto` = WEB_CONCURRENCY when it is a positive integer, else min(available parallelism, cgroup CPU limit),
 * at least 1. An unusable WEB_CONCURRENCY is reported, not fatal: platforms set it for us.
 */
export function resolveWorkerCount(
  configured: 'auto' | number,
  env: NodeJS.ProcessEnv = process.env,
  cpus: number = os.availableParallelism(),
  cgroupLimit: number | undefined = cgroupCpuLimit(),
): WorkerCountDecision {
  if (configured !== 'auto') return { count: configured };
  let warning: string | undefined;
  const raw = env.WEB_CONCURRENCY;
  if (raw !== undefined && raw !== '') {
    if (/^\d+$/.test(raw.trim()) && Number(raw) >= 1 && Number(raw) <= 256) return { count: Number(raw) };
    warning = `WEB_CONCURRENCY="${raw}" is not a worker count between 1 and 256; using auto`;
  }
  const limit = cgroupLimit === undefined ? cpus : Math.min(cpus, Math.floor(cgroupLimit));
  return { count: Math.max(1, limit), warning };
}
