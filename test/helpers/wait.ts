import tap from 'tap';
import { SCALE, scaled } from './time-scale.mjs';

export { SCALE, scaled } from './time-scale.mjs';

// tap's own limit for this file (the `timeout` of its config) stretches like every other budget.
const fileTimeoutS = Number(process.env.TAP_TIMEOUT ?? 0);
if (SCALE > 1 && fileTimeoutS > 0) tap.setTimeout(scaled(fileTimeoutS * 1000));

/** How a budget reads in an error message: the effective milliseconds, and the factor when there is one. */
export const budgetText = (budgetMs: number) => (SCALE === 1 ? `${budgetMs} ms` : `${scaled(budgetMs)} ms (${budgetMs} ms × time scale ${SCALE})`);

/**
 * Polls `probe` every `everyMs` until it answers a value other than undefined, and resolves with it. `budgetMs`
 * is what the wait may take on a quiet machine: it is stretched by the time scale. A timeout names `what` and,
 * with `last`, what was seen last.
 */
export async function until<T>(
  what: string,
  probe: () => Promise<T | undefined> | T | undefined,
  budgetMs = 10_000,
  options: { everyMs?: number; last?: () => unknown } = {},
): Promise<T> {
  const deadline = Date.now() + scaled(budgetMs);
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) {
      const seen = options.last ? `; last seen: ${JSON.stringify(options.last())}` : '';
      throw new Error(`timed out after ${budgetText(budgetMs)} waiting for ${what}${seen}`);
    }
    await new Promise((resolve) => setTimeout(resolve, options.everyMs ?? 20));
  }
}

/**
 * Resolves once the clock is past `deadline` (a `Date.now()` value). Not a wait for a condition: only for a
 * test that shows something did *not* happen before a product deadline, so it must let that deadline pass.
 */
export async function past(deadline: number): Promise<void> {
  while (Date.now() <= deadline) await new Promise((resolve) => setTimeout(resolve, deadline - Date.now() + 1));
}
