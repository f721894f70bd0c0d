import { readFileSync } from 'node:fs';
import { availableParallelism, totalmem } from 'node:os';
import { cgroupCpuLimit } from '../config/sizing.js';
import type { Sample } from './decide.js';

/** CPU time (user + system, µs) and resident memory (bytes) of one process, or undefined once it is gone. */
export type ProcessReader = (pid: number) => { cpuUs: number; rssBytes: number } | undefined;

const TICKS_PER_SECOND = 100;
const PAGE_BYTES = 4096;

/** Linux: `/proc/<pid>/stat` fields 14 and 15 (utime, stime, in clock ticks) and `/proc/<pid>/statm` (resident pages). */
export const procReader: ProcessReader = (pid) => {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The command name may hold spaces and parentheses: fields are counted after its closing parenthesis.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const ticks = Number(fields[11]) + Number(fields[12]);
    const resident = Number(readFileSync(`/proc/${pid}/statm`, 'utf8').split(' ')[1]);
    if (!Number.isFinite(ticks) || !Number.isFinite(resident)) return undefined;
    return { cpuUs: (ticks * 1_000_000) / TICKS_PER_SECOND, rssBytes: resident * PAGE_BYTES };
  } catch {
    return undefined;
  }
};

export interface SamplerOptions {
  read?: ProcessReader;
  now?: () => number;
  /** CPUs this server may use (default: the cgroup quota, else the available parallelism). */
  cpus?: number;
  /** Memory this server may use, in bytes (default: the host's total memory). */
  memoryBytes?: number;
}

/**
 * A server's load as the autoscaler sees it: the CPU of its primary and every worker together, in percent of
 * the CPUs it may use, over the time since the previous sample; and their resident memory in percent of the
 * host's. The first call only sets the starting point and returns undefined, as does a call with no process
 * readable (a node whose signals are missing is then never picked and never triggers a scale-out).
 */
export class ServerSampler {
  private readonly read: ProcessReader;
  private readonly now: () => number;
  private readonly cpus: number;
  private readonly memoryBytes: number;
  private previous: { at: number; cpuUs: Map<number, number> } | undefined;

  constructor(options: SamplerOptions = {}) {
    this.read = options.read ?? procReader;
    this.now = options.now ?? Date.now;
    this.cpus = options.cpus ?? cgroupCpuLimit() ?? availableParallelism();
    this.memoryBytes = options.memoryBytes ?? totalmem();
  }

  sample(pids: readonly number[]): Sample | undefined {
    const at = this.now();
    const cpuUs = new Map<number, number>();
    let rssBytes = 0;
    for (const pid of pids) {
      const reading = this.read(pid);
      if (!reading) continue;
      cpuUs.set(pid, reading.cpuUs);
      rssBytes += reading.rssBytes;
    }
    const previous = this.previous;
    this.previous = { at, cpuUs };
    if (!previous || cpuUs.size === 0 || at <= previous.at) return undefined;
    let used = 0;
    // A process first seen here starts counting from here: a worker is handed over once it is ready, and the CPU
    // it spent booting is no load of the server (counted in one interval it reads as a spike to 100 %).
    for (const [pid, now] of cpuUs) {
      const before = previous.cpuUs.get(pid);
      if (before !== undefined) used += Math.max(0, now - before);
    }
    const elapsedUs = (at - previous.at) * 1_000;
    return {
      at,
      cpu: Math.min(100, (100 * used) / (elapsedUs * this.cpus)),
      memory: Math.min(100, (100 * rssBytes) / this.memoryBytes),
    };
  }
}
