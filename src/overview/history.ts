/** The window the dashboard's sparklines show. */
export const HISTORY_WINDOW_MS = 10 * 60_000;

/** Samples of named figures over time, oldest first: `at` and one array per figure, index for index. */
export interface Series<F extends string> {
  at: number[];
  values: Record<F, number[]>;
}

/**
 * The last `windowMs` of samples of a few figures, per subject (a worker process, the server). Samples older
 * than the window are dropped as new ones come; a subject that stops reporting is dropped once its newest
 * sample leaves the window.
 */
export class History<F extends string> {
  private readonly subjects = new Map<string, Series<F>>();
  /** When subjects that stopped reporting were last looked for (see `record`). */
  private prunedAt = Number.NEGATIVE_INFINITY;

  constructor(
    private readonly figures: readonly F[],
    private readonly windowMs = HISTORY_WINDOW_MS,
  ) {}

  record(subject: string, at: number, sample: Record<F, number>): void {
    let series = this.subjects.get(subject);
    if (!series) {
      series = { at: [], values: Object.fromEntries(this.figures.map((figure) => [figure, []])) as unknown as Record<F, number[]> };
      this.subjects.set(subject, series);
    }
    series.at.push(at);
    for (const figure of this.figures) series.values[figure].push(sample[figure]);
    this.trim(series, at);
    // A subject that stopped reporting (a worker replaced by a restart) is dropped here too, whether or not
    // anyone reads the history: looked for once every tenth of the window.
    if (at - this.prunedAt >= this.windowMs / 10) {
      this.prunedAt = at;
      for (const [name, other] of this.subjects) if (other.at.length === 0 || other.at[other.at.length - 1]! < at - this.windowMs) this.subjects.delete(name);
    }
  }

  /** How many subjects have samples kept. */
  get size(): number {
    return this.subjects.size;
  }

  /** Each subject's samples taken after `since` (all of the window by default), oldest first. */
  since(now: number, since = 0): Record<string, Series<F>> {
    const result: Record<string, Series<F>> = {};
    for (const [subject, series] of this.subjects) {
      this.trim(series, now);
      if (series.at.length === 0) {
        this.subjects.delete(subject);
        continue;
      }
      const first = series.at.findIndex((at) => at > since);
      if (first < 0) continue;
      result[subject] = {
        at: series.at.slice(first),
        values: Object.fromEntries(this.figures.map((figure) => [figure, series.values[figure].slice(first)])) as unknown as Record<F, number[]>,
      };
    }
    return result;
  }

  private trim(series: Series<F>, now: number): void {
    let drop = 0;
    while (drop < series.at.length && series.at[drop]! < now - this.windowMs) drop += 1;
    if (drop === 0) return;
    series.at.splice(0, drop);
    for (const figure of this.figures) series.values[figure].splice(0, drop);
  }
}
