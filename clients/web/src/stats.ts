// Lateness (scheduled → start) of the runs that started in the last minute: percentiles, a histogram and a
// p99 sparkline, for the board.

export const WINDOW_MS = 60_000;
export const SPARK_STEP_MS = 5_000;
// Histogram buckets, upper bounds in ms (the last one is open).
export const BUCKETS: readonly { label: string; upTo: number }[] = [
  { label: "<1 ms", upTo: 1 },
  { label: "<10 ms", upTo: 10 },
  { label: "<100 ms", upTo: 100 },
  { label: "<1 s", upTo: 1000 },
  { label: "<2 s", upTo: 2000 },
  { label: "≥2 s", upTo: Infinity },
];

/** The q-quantile (0..1) of ascending `sorted` values, nearest rank; undefined when empty. */
export function quantile(sorted: readonly number[], q: number): number | undefined {
  if (sorted.length === 0) return undefined;
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1));
  return sorted[rank];
}

type Sample = { startMs: number; latenessMs: number };

export type LatenessSummary = {
  count: number;
  p50: number | undefined;
  p99: number | undefined;
  histogram: number[];
  spark: (number | undefined)[];
};

/** One sample per run, replaced when the run reports a later figure (an executor's real start can follow
 * the start recorded at its claim). */
export class LatenessWindow {
  private readonly byRun = new Map<string, Sample>();

  set(run: string, startMs: number, latenessMs: number): void {
    this.byRun.set(run, { startMs, latenessMs: Math.max(0, latenessMs) });
  }

  summary(nowMs: number): LatenessSummary {
    const from = nowMs - WINDOW_MS;
    for (const [run, sample] of this.byRun) if (sample.startMs <= from) this.byRun.delete(run);
    const samples = [...this.byRun.values()].filter((s) => s.startMs <= nowMs + SPARK_STEP_MS);
    const values = samples.map((s) => s.latenessMs).sort((a, b) => a - b);
    const histogram = BUCKETS.map(() => 0);
    for (const value of values) {
      const index = BUCKETS.findIndex((bucket) => value < bucket.upTo);
      histogram[index] = (histogram[index] ?? 0) + 1;
    }
    const steps = WINDOW_MS / SPARK_STEP_MS;
    const spark: (number | undefined)[] = [];
    for (let i = 0; i < steps; i++) {
      const start = from + i * SPARK_STEP_MS;
      const slice = samples
        .filter((s) => s.startMs > start && s.startMs <= start + SPARK_STEP_MS)
        .map((s) => s.latenessMs)
        .sort((a, b) => a - b);
      spark.push(quantile(slice, 0.99));
    }
    return { count: values.length, p50: quantile(values, 0.5), p99: quantile(values, 0.99), histogram, spark };
  }
}
