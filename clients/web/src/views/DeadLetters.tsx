// Dead-lettered runs (every attempt of their retry policy failed), newest first and live: a run appears as it
// is dead-lettered. Each has a replay; "Replay all" replays every one that matches, after a dry-run count.
import { useCallback, useState, type FormEvent } from "react";
import { RunState, type Run } from "@gen/jobmesh/v1/run_pb.js";
import { jobService } from "../api";
import type { RunCounts } from "@gen/jobmesh/v1/search_service_pb.js";
import { LiveDot, ProblemBanner, runTitle } from "../components";
import { formatCount, stateTotals } from "../counts";
import { problemOf, type Problem } from "../errors";
import { useWatchRuns } from "../hooks";
import { linkTo } from "../router";
import { formatTime, millisOf } from "../time";

const DEAD = "state = DEAD_LETTERED";
const SHOWN = 500; // the newest this many; a bulk replay reaches every one that matches

function newest(a: Run, b: Run): number {
  return (millisOf(b.endTime) ?? 0) - (millisOf(a.endTime) ?? 0);
}

export function DeadLetters() {
  const [runs, setRuns] = useState<ReadonlyMap<string, Run>>(new Map());
  const onBatch = useCallback((batch: Run[]) => {
    setRuns((before) => {
      const next = new Map(before);
      for (const run of batch) {
        if (run.state === RunState.DEAD_LETTERED) next.set(run.name, run);
        else next.delete(run.name);
      }
      return next;
    });
  }, []);
  const [total, setTotal] = useState<bigint>();
  const onCounts = useCallback(
    (counts: RunCounts) => setTotal(stateTotals(counts).byState.get(RunState.DEAD_LETTERED) ?? 0n),
    [],
  );
  const liveness = useWatchRuns("jobs/-", onBatch, SHOWN, DEAD, onCounts);
  const shown = [...runs.values()].sort(newest).slice(0, SHOWN);
  const [replayed, setReplayed] = useState<Record<string, string>>({});
  const [problem, setProblem] = useState<Problem>();
  const replay = async (name: string) => {
    setProblem(undefined);
    try {
      const response = await jobService.replayRun({ name, requestId: `replay-${name}` });
      setReplayed((before) => ({ ...before, [name]: response.run?.name ?? "" }));
    } catch (error) {
      setProblem(problemOf(error));
    }
  };
  return (
    <section aria-labelledby="dead-title">
      <header className="view-head">
        <h1 id="dead-title">Dead letters</h1>
        <LiveDot liveness={liveness} />
      </header>
      <p className="hint">Runs that failed every attempt their retry policy allowed. A replay runs one again, as a new run of its job.</p>
      {total === undefined ? null : (
        <p className="hint" data-figure="dead-letters" data-value={String(total)}>
          {formatCount(total)} dead-lettered {total === 1n ? "run" : "runs"} in all
          {total > BigInt(SHOWN) ? `; the newest ${SHOWN} are listed` : ""}.
        </p>
      )}
      <BulkReplay />
      <ProblemBanner problem={problem} />
      <table className="list" aria-label="Dead letters">
        <thead>
          <tr>
            <th scope="col">Run</th>
            <th scope="col">Attempts</th>
            <th scope="col">Ended</th>
            <th scope="col">Error</th>
            <th scope="col">Replay</th>
          </tr>
        </thead>
        <tbody>
          {shown.map((run) => (
            <tr key={run.name} data-run={run.name}>
              <td className="mono">
                <a href={linkTo(run.name)}>{runTitle(run.name)}</a>
              </td>
              <td>{run.attempt}</td>
              <td>{formatTime(run.endTime)}</td>
              <td>{run.error ? `${run.error.type}: ${run.error.message}` : ""}</td>
              <td>
                {replayed[run.name] ? (
                  <a href={linkTo(replayed[run.name] ?? "")}>replayed as {runTitle(replayed[run.name] ?? "")}</a>
                ) : (
                  <button type="button" onClick={() => void replay(run.name)}>
                    Replay
                  </button>
                )}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      {liveness === "live" && shown.length === 0 ? <p className="empty">No dead letters.</p> : null}
    </section>
  );
}

type Counted = { filter: string; count: number; requestId: string };
type Done = { matched: number; changed: number; failures: string[] };

/** Replays every dead letter that matches (optionally narrowed by a filter): a dry run counts them first,
 * and the replay happens only once that count is confirmed. The confirmation keeps one request id, so a
 * second click (or a retry) replays nothing twice. */
function BulkReplay() {
  const [narrow, setNarrow] = useState("");
  const [counted, setCounted] = useState<Counted>();
  const [done, setDone] = useState<Done>();
  const [problem, setProblem] = useState<Problem>();
  const [busy, setBusy] = useState(false);
  const filter = narrow.trim() ? `${DEAD} AND ${narrow.trim()}` : DEAD;
  const count = async (event: FormEvent) => {
    event.preventDefault();
    setProblem(undefined);
    setDone(undefined);
    setBusy(true);
    try {
      const answer = await jobService.bulkReplayRuns({ parent: "jobs/-", filter, validateOnly: true });
      const requestId = `bulk-replay-${Date.now()}-${Math.random().toString(36).slice(2)}`;
      setCounted({ filter, count: answer.matchedCount, requestId });
    } catch (error) {
      setProblem(problemOf(error));
    } finally {
      setBusy(false);
    }
  };
  const confirm = async (chosen: Counted) => {
    setProblem(undefined);
    setBusy(true);
    try {
      const answer = await jobService.bulkReplayRuns({
        parent: "jobs/-",
        filter: chosen.filter,
        requestId: chosen.requestId,
      });
      const failures = answer.failures.map((failure) => `${failure.name}: ${failure.status?.message ?? ""}`);
      setDone({ matched: answer.matchedCount, changed: answer.changedCount, failures });
      setCounted(undefined);
    } catch (error) {
      setProblem(problemOf(error));
    } finally {
      setBusy(false);
    }
  };
  const filterProblem = problem?.fields["filter"];
  return (
    <div className="bulk">
      <form className="bulk-form" onSubmit={(event) => void count(event)}>
        <label>
          Only those matching (optional)
          <input
            name="narrow"
            value={narrow}
            placeholder='labels.team = "billing"'
            aria-invalid={filterProblem ? true : undefined}
            onChange={(event) => {
              setNarrow(event.target.value);
              setCounted(undefined);
            }}
          />
        </label>
        <button type="submit" disabled={busy}>
          Replay all…
        </button>
      </form>
      {filterProblem ? <p className="field-error" role="alert">{filterProblem}</p> : <ProblemBanner problem={problem} />}
      {counted ? (
        <div className="confirm" role="dialog" aria-label="Confirm the replay">
          {counted.count === 0 ? (
            <p>No dead letters match.</p>
          ) : (
            <>
              <p>
                Replay {counted.count} dead-lettered {counted.count === 1 ? "run" : "runs"}, each as a new run of its job?
              </p>
              <button type="button" disabled={busy} onClick={() => void confirm(counted)}>
                Replay {counted.count} {counted.count === 1 ? "run" : "runs"}
              </button>
            </>
          )}
          <button type="button" onClick={() => setCounted(undefined)}>
            Cancel
          </button>
        </div>
      ) : null}
      {done ? (
        <div role="status" className="bulk-done">
          Replayed {done.changed} of {done.matched} {done.matched === 1 ? "run" : "runs"}.
          {done.failures.length ? (
            <ul aria-label="Not replayed">
              {done.failures.map((failure) => (
                <li key={failure}>{failure}</li>
              ))}
            </ul>
          ) : null}
        </div>
      ) : null}
    </div>
  );
}
