// The sparklines' data: the last ten minutes of each process, grown by what each beat brings.
export const WINDOW_MS = 10 * 60_000;

/**
 * Adds the new samples to the series kept so far and drops what left the window, measured on the server's
 * clock (the newest sample), not the browser's.
 */
export function mergeHistory(kept, incoming) {
  const series = {};
  let newest = 0;
  for (const entry of [...Object.values(kept), ...Object.values(incoming)]) newest = Math.max(newest, entry.at[entry.at.length - 1] ?? 0);
  const floor = newest - WINDOW_MS;
  for (const subject of new Set([...Object.keys(kept), ...Object.keys(incoming)])) {
    const old = kept[subject] ?? { at: [], values: {} };
    const add = incoming[subject] ?? { at: [], values: {} };
    const figures = new Set([...Object.keys(old.values), ...Object.keys(add.values)]);
    const at = [...old.at, ...add.at];
    const values = {};
    for (const figure of figures) values[figure] = [...(old.values[figure] ?? old.at.map(() => null)), ...(add.values[figure] ?? add.at.map(() => null))];
    const first = at.findIndex((time) => time >= floor);
    if (first < 0) continue;
    series[subject] = { at: at.slice(first), values: Object.fromEntries(Object.entries(values).map(([figure, list]) => [figure, list.slice(first)])) };
  }
  return { series, newest };
}
