// One factor for every time budget of the test suite: how long a test waits for a condition, and the product
// timeouts the test processes run with (so that none of them fires first on a busy machine). Plain JavaScript,
// so the fixtures (test/fixtures/*.mjs) read the same factor as the tests that start them.
import os from 'node:os';

export const SCALE_VARIABLE = 'FLEETPLANE_TEST_TIME_SCALE';
/** The most the load average alone raises the factor to. */
export const MAX_AUTO_SCALE = 10;

/**
 * The factor for the variable's `value` on a machine with this 1-minute `load` and `cpus`: the value when set
 * (a number ≥ 1, else an error), otherwise `ceil(load / cpus)` (at most MAX_AUTO_SCALE) when the load exceeds
 * the CPU count, else 1.
 * @param {string | undefined} value
 * @param {number} load
 * @param {number} cpus
 * @returns {{ factor: number, source: 'variable' | 'load' | 'default', load: number, cpus: number }}
 */
export function resolveTimeScale(value, load, cpus) {
  if (value !== undefined && value.trim() !== '') {
    const factor = Number(value);
    if (!Number.isFinite(factor) || factor < 1) throw new Error(`${SCALE_VARIABLE} must be a number ≥ 1 (got ${JSON.stringify(value)})`);
    return { factor, source: 'variable', load, cpus };
  }
  if (load > cpus) return { factor: Math.min(MAX_AUTO_SCALE, Math.ceil(load / cpus)), source: 'load', load, cpus };
  return { factor: 1, source: 'default', load, cpus };
}

/** This process's factor, decided once when the module loads. */
export const TIME_SCALE = resolveTimeScale(process.env[SCALE_VARIABLE], os.loadavg()[0], os.availableParallelism());
export const SCALE = TIME_SCALE.factor;

/**
 * `ms` (a budget as it would be on a quiet machine) stretched by the factor.
 * @param {number} ms
 */
export const scaled = (ms) => Math.ceil(ms * SCALE);

/** One line saying what the factor is and why. */
export function describeTimeScale(scale = TIME_SCALE) {
  const why =
    scale.source === 'variable' ? `from ${SCALE_VARIABLE}` : scale.source === 'load' ? `1-minute load ${scale.load.toFixed(1)} on ${scale.cpus} CPUs` : `load ${scale.load.toFixed(1)} within ${scale.cpus} CPUs`;
  return `test time scale ${scale.factor} (${why})`;
}
