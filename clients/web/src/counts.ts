// The mesh's counts of runs (CountRuns, or WatchRuns with includeRunCounts), as the board shows them: the
// server keeps them as runs change, so they cover every run, not only those the dashboard happened to see.
import type { RunState } from "@gen/jobmesh/v1/run_pb.js";
import type { RunCounts } from "@gen/jobmesh/v1/search_service_pb.js";

export type StateTotals = { byState: ReadonlyMap<RunState, bigint>; upcoming: bigint };

/** Runs per state over every namespace and queue the counts hold; upcoming runs (scheduled ahead of their
 * time, not yet due) apart, as ListRuns lists them only when asked. */
export function stateTotals(counts: RunCounts): StateTotals {
  const byState = new Map<RunState, bigint>();
  let upcoming = 0n;
  for (const count of counts.counts) {
    byState.set(count.state, (byState.get(count.state) ?? 0n) + count.runCount);
    upcoming += count.upcomingRunCount;
  }
  return { byState, upcoming };
}

/** A count as the board prints it ("12,345"). */
export function formatCount(value: bigint): string {
  return value.toLocaleString("en-US");
}
