// The live board: every run change of the mesh from WatchRuns (no polling), the mesh's counts per state
// (kept by the server and pushed on the same stream as they change), runs moving between states, and the
// scheduled → start lateness of the last minute.
import { useCallback, useEffect, useRef, useState } from "react";
import { RunState, type Run } from "@gen/jobmesh/v1/run_pb.js";
import type { RunCounts } from "@gen/jobmesh/v1/search_service_pb.js";
import { LiveDot, RunTable, runStateName } from "../components";
import { formatCount, stateTotals, type StateTotals } from "../counts";
import { useWatchRuns } from "../hooks";
import { RunBook, STATES } from "../runbook";
import { BUCKETS, WINDOW_MS, type LatenessSummary } from "../stats";
import { formatMillis } from "../time";

const SHOWN = 500; // rows the table holds (it renders only those in view)
const MOVED_MS = 1500; // how long a run that changed state stays highlighted

export function Board() {
  const book = useRef(new RunBook());
  const [, setVersion] = useState(0);
  const [moved, setMoved] = useState<Set<string>>(new Set());
  const [summary, setSummary] = useState<LatenessSummary>(() => book.current.lateness.summary(Date.now()));
  const loaded = useRef(false); // the stream's first page is not "moving"
  const [showScheduled, setShowScheduled] = useState(false);
  const onBatch = useCallback((runs: Run[]) => {
    const changed = book.current.apply(runs, Date.now());
    if (loaded.current) setMoved(changed);
    loaded.current = true;
    setSummary(book.current.lateness.summary(Date.now()));
    setVersion((n) => n + 1);
  }, []);
  const [totals, setTotals] = useState<StateTotals>();
  const onCounts = useCallback((counts: RunCounts) => setTotals(stateTotals(counts)), []);
  const liveness = useWatchRuns("jobs/-", onBatch, 1000, "", onCounts);
  useEffect(() => {
    // The window slides even when nothing arrives.
    const timer = window.setInterval(() => setSummary(book.current.lateness.summary(Date.now())), 1000);
    return () => window.clearInterval(timer);
  }, []);
  useEffect(() => {
    if (moved.size === 0) return;
    const timer = window.setTimeout(() => setMoved(new Set()), MOVED_MS);
    return () => window.clearTimeout(timer);
  }, [moved]);
  const runs = book.current.recent(SHOWN, showScheduled ? undefined : (run) => run.state !== RunState.SCHEDULED);
  return (
    <section aria-labelledby="board-title">
      <header className="view-head">
        <h1 id="board-title">Live board</h1>
        <LiveDot liveness={liveness} />
        <a className="button" href="#/new">
          New job
        </a>
      </header>
      <ul className="tiles" aria-label="Runs per state">
        {STATES.map((state) => (
          <li key={state} className={`tile state-${runStateName(state).replace(" ", "_").toLowerCase()}`}>
            <span
              className="tile-count"
              data-count={runStateName(state)}
              data-value={totals === undefined ? undefined : String(totals.byState.get(state) ?? 0n)}
            >
              {totals === undefined ? "…" : formatCount(totals.byState.get(state) ?? 0n)}
            </span>
            <span className="tile-label">{runStateName(state).toLowerCase()}</span>
          </li>
        ))}
      </ul>
      <p className="hint" data-figure="upcoming">
        Every run of the mesh you may see, counted by the server.{" "}
        {totals === undefined || totals.upcoming === 0n
          ? null
          : `Besides these, ${formatCount(totals.upcoming)} upcoming (made ahead of their time, not yet due).`}
      </p>
      <LatenessPanel summary={summary} />
      <h2>
        Runs, most recent change first
        <label className="hint inline">
          <input type="checkbox" checked={showScheduled} onChange={(e) => setShowScheduled(e.target.checked)} /> with
          those waiting for their time (scheduled)
        </label>
      </h2>
      <RunTable
        runs={runs}
        height={420}
        moved={moved}
        label="Runs on the board"
        empty={
          <>
            No run has moved yet. <a href="#/new">Create a job</a>: its runs appear here as they are queued, run and
            end.
          </>
        }
      />
    </section>
  );
}

function LatenessPanel({ summary }: { summary: LatenessSummary }) {
  const top = Math.max(1, ...summary.histogram);
  const peak = Math.max(1, ...summary.spark.map((value) => value ?? 0));
  const points = summary.spark.flatMap((value, i) =>
    value === undefined ? [] : [{ x: (i / (summary.spark.length - 1)) * 100, y: 28 - (value / peak) * 26 }],
  );
  return (
    <div className="lateness" aria-labelledby="lateness-title">
      <h2 id="lateness-title">Scheduled → start lateness, last {WINDOW_MS / 60_000} minute</h2>
      <dl className="lateness-figures">
        <div>
          <dt>p50</dt>
          <dd data-figure="p50">{formatMillis(summary.p50)}</dd>
        </div>
        <div>
          <dt>p99</dt>
          <dd data-figure="p99">{formatMillis(summary.p99)}</dd>
        </div>
        <div>
          <dt>starts</dt>
          <dd data-figure="starts">{summary.count}</dd>
        </div>
      </dl>
      <figure className="spark">
        <svg viewBox="0 0 100 30" preserveAspectRatio="none" role="img" aria-label="p99 lateness every 5 seconds">
          <polyline points={points.map((p) => `${p.x},${p.y}`).join(" ")} fill="none" stroke="currentColor" strokeWidth="1.5" vectorEffect="non-scaling-stroke" />
          {points.map((p) => (
            <line key={p.x} x1={p.x} x2={p.x} y1={p.y} y2={p.y} stroke="currentColor" strokeWidth="5" strokeLinecap="round" vectorEffect="non-scaling-stroke" />
          ))}
        </svg>
        <figcaption>p99 per 5 s (peak {formatMillis(summary.spark.some((v) => v !== undefined) ? peak : undefined)})</figcaption>
      </figure>
      <ol className="histogram" aria-label="Starts by lateness">
        {BUCKETS.map((bucket, i) => (
          <li key={bucket.label}>
            <span className="bar" style={{ height: `${((summary.histogram[i] ?? 0) / top) * 100}%` }} />
            <span className="bar-label">{bucket.label}</span>
            <span className="bar-count">{summary.histogram[i] ?? 0}</span>
          </li>
        ))}
      </ol>
    </div>
  );
}
