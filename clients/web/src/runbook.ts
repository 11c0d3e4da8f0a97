// The board's picture of the runs: the latest version of each run seen (the WatchRuns stream's first page,
// then every change), and the lateness of the runs that started (a run evicted here stays in the lateness
// window until it ages out of it). The counts per state are the mesh's, not this picture's (counts.ts).
// Bounded: past `capacity` runs, the ones changed longest ago are dropped (finished ones first).
import { RunState, type Run } from "@gen/jobmesh/v1/run_pb.js";
import { LatenessWindow } from "./stats";
import { durationMillis, millisOf } from "./time";

export const STATES: readonly RunState[] = [
  RunState.SCHEDULED,
  RunState.QUEUED,
  RunState.RUNNING,
  RunState.CANCELLING,
  RunState.SUCCEEDED,
  RunState.FAILED,
  RunState.CANCELLED,
  RunState.TIMED_OUT,
  RunState.DEAD_LETTERED,
];

const TERMINAL = new Set([
  RunState.SUCCEEDED,
  RunState.FAILED,
  RunState.CANCELLED,
  RunState.TIMED_OUT,
  RunState.DEAD_LETTERED,
]);

export function isTerminal(state: RunState): boolean {
  return TERMINAL.has(state);
}

type Entry = { run: Run; changedAt: number; seq: number };

export class RunBook {
  private readonly entries = new Map<string, Entry>();
  private seq = 0;
  readonly lateness = new LatenessWindow();

  constructor(private readonly capacity = 5000) {}

  get size(): number {
    return this.entries.size;
  }

  /** Applies a batch of runs (oldest change first); returns the names whose state changed. */
  apply(runs: readonly Run[], nowMs: number): Set<string> {
    const moved = new Set<string>();
    for (const run of runs) {
      const before = this.entries.get(run.name);
      if (before && isStale(before.run, run)) continue; // an older version arriving late, or the same again
      if (!before || before.run.state !== run.state) moved.add(run.name);
      this.entries.set(run.name, { run, changedAt: nowMs, seq: this.seq++ });
      this.noteStart(run);
    }
    this.evict();
    return moved;
  }

  /** The runs changed most recently first, at most `limit`, of those `keep` keeps. */
  recent(limit: number, keep: (run: Run) => boolean = () => true): Run[] {
    return [...this.entries.values()]
      .filter((entry) => keep(entry.run))
      .sort((a, b) => b.seq - a.seq)
      .slice(0, limit)
      .map((entry) => entry.run);
  }

  private noteStart(run: Run): void {
    const lateness = durationMillis(run.lateness);
    const start = millisOf(run.startTime);
    if (lateness !== undefined && start !== undefined) this.lateness.set(run.name, start, lateness);
  }

  private evict(): void {
    if (this.entries.size <= this.capacity) return;
    const ordered = [...this.entries.entries()].sort(
      ([, a], [, b]) => Number(isTerminal(b.run.state)) - Number(isTerminal(a.run.state)) || a.seq - b.seq,
    );
    for (const [name] of ordered.slice(0, this.entries.size - this.capacity)) this.entries.delete(name);
  }
}

function isStale(known: Run, incoming: Run): boolean {
  const [was, now] = [millisOf(known.updateTime) ?? 0, millisOf(incoming.updateTime) ?? 0];
  return was > now || (was === now && known.state === incoming.state);
}
