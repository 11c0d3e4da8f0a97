// A run: its attempts, timings and lateness, its error, cancel and replay, and its log tail (TailRunLogs,
// following). The run's own changes arrive on WatchRuns for its job.
import { useCallback, useEffect, useRef, useState } from "react";
import { LogStream, RunState, RunTrigger, type LogLine, type Run } from "@gen/jobmesh/v1/run_pb.js";
import { jobService, searchService } from "../api";
import { LiveDot, ProblemBanner, StateBadge, runTitle } from "../components";
import { problemOf, type Problem } from "../errors";
import { useLoad, useLogTail, useWatchRuns } from "../hooks";
import { isTerminal } from "../runbook";
import { linkTo, navigate } from "../router";
import { durationMillis, formatDuration, formatLogTime, formatMillis, formatTime, isoOf, millisOf } from "../time";

const MAX_LINES = 5000; // the page keeps the newest lines of a long log

const REPLAYABLE = new Set([RunState.FAILED, RunState.TIMED_OUT, RunState.DEAD_LETTERED]);

function span(from: number | undefined, to: number | undefined): string {
  return from === undefined || to === undefined ? "—" : formatMillis(to - from);
}

function Timings({ run }: { run: Run }) {
  const schedule = millisOf(run.scheduleTime);
  const start = millisOf(run.startTime);
  const end = millisOf(run.endTime);
  return (
    <dl className="details">
      <dt>Trigger</dt>
      <dd data-figure="trigger">{(RunTrigger[run.trigger] ?? "").toLowerCase().replaceAll("_", " ")}</dd>
      <dt>Scheduled</dt>
      <dd>
        {formatTime(run.scheduleTime)}
        {run.createdAfterScheduleTime ? (
          <span className="badge" data-mark="created-after-schedule-time" title="lateness counts from when the run was made">
            {" "}already passed when made: ran at once
          </span>
        ) : null}
      </dd>
      <dt>Due (this attempt)</dt>
      <dd>{formatTime(run.dueTime)}</dd>
      <dt>Queued</dt>
      <dd>{formatTime(run.dispatchTime)}</dd>
      <dt>Started</dt>
      <dd>{formatTime(run.startTime)}</dd>
      <dt>Lateness</dt>
      <dd data-figure="lateness">
        {run.lateness ? formatDuration(run.lateness) : "—"}
        {run.lateness && durationMillis(run.lateness)! > 2000 ? " (late beyond 2 s)" : ""}
      </dd>
      <dt>Last heartbeat</dt>
      <dd>{formatTime(run.lastHeartbeatTime)}</dd>
      <dt>Ended</dt>
      <dd>{formatTime(run.endTime)}</dd>
      <dt>Ran for</dt>
      <dd>{span(start, end)}</dd>
      <dt>Scheduled → end</dt>
      <dd>{span(schedule, end)}</dd>
      <dt>Executor</dt>
      <dd className="mono">{run.executor || "—"}</dd>
      <dt>Exit code</dt>
      <dd>{run.exitCode ?? "—"}</dd>
      {run.replayOf ? (
        <>
          <dt>Replay of</dt>
          <dd>
            <a href={linkTo(run.replayOf)}>{runTitle(run.replayOf)}</a>
          </dd>
        </>
      ) : null}
    </dl>
  );
}

function Attempts({ run }: { run: Run }) {
  return (
    <table className="list" aria-label="Attempts">
      <thead>
        <tr>
          <th scope="col">#</th>
          <th scope="col">State</th>
          <th scope="col">Executor</th>
          <th scope="col">Started</th>
          <th scope="col">Ended</th>
          <th scope="col">Error</th>
        </tr>
      </thead>
      <tbody>
        {run.previousAttempts.map((attempt) => (
          <tr key={attempt.attempt}>
            <td>{attempt.attempt}</td>
            <td>
              <StateBadge state={attempt.state} />
            </td>
            <td className="mono">{attempt.executor}</td>
            <td>{formatTime(attempt.startTime)}</td>
            <td>{formatTime(attempt.endTime)}</td>
            <td>{attempt.error ? `${attempt.error.type}: ${attempt.error.message}` : ""}</td>
          </tr>
        ))}
        <tr className="current">
          <td>{run.attempt}</td>
          <td>
            <StateBadge state={run.state} />
          </td>
          <td className="mono">{run.executor}</td>
          <td>{formatTime(run.startTime)}</td>
          <td>{formatTime(run.endTime)}</td>
          <td>{run.error?.type ? `${run.error.type}: ${run.error.message}` : ""}</td>
        </tr>
      </tbody>
    </table>
  );
}

function LogTail({ name }: { name: string }) {
  const [lines, setLines] = useState<LogLine[]>([]);
  const box = useRef<HTMLDivElement>(null);
  const pinned = useRef(true); // follows the end until the reader scrolls up
  const onBatch = useCallback((batch: LogLine[]) => {
    setLines((before) => {
      const seen = before.at(-1)?.sequence ?? 0n;
      const all = [...before, ...batch.filter((line) => line.sequence > seen)];
      return all.length > MAX_LINES ? all.slice(-MAX_LINES) : all;
    });
  }, []);
  const liveness = useLogTail(name, onBatch);
  useEffect(() => {
    const element = box.current;
    if (element && pinned.current) element.scrollTop = element.scrollHeight;
  }, [lines]);
  return (
    <div>
      <h2>
        Log <LiveDot liveness={liveness} />
      </h2>
      <div
        ref={box}
        className="log"
        role="log"
        aria-label="Run log"
        tabIndex={0}
        onScroll={(e) => {
          const el = e.currentTarget;
          pinned.current = el.scrollTop + el.clientHeight >= el.scrollHeight - 8;
        }}
      >
        {lines.length === 0 ? <p className="empty">No output yet.</p> : null}
        {lines.map((line) => (
          <div key={String(line.sequence)} className={`logline stream-${(LogStream[line.stream] ?? "").toLowerCase()}`} data-sequence={String(line.sequence)}>
            <time className="logtime" dateTime={isoOf(line.time)} title={formatTime(line.time)}>
              {formatLogTime(line.time)}
            </time>
            <span className="logmeta">
              {line.attempt}·{String(line.sequence)}
            </span>
            <span className="logtext">{line.text}</span>
          </div>
        ))}
      </div>
    </div>
  );
}

export function RunPage({ name }: { name: string }) {
  const loaded = useLoad(() => searchService.getRun({ name }), [name]);
  const [live, setLive] = useState<Run>();
  const [problem, setProblem] = useState<Problem>();
  const job = name.split("/runs/")[0] ?? "";
  const onBatch = useCallback(
    (runs: Run[]) => {
      const mine = runs.filter((run) => run.name === name).at(-1);
      if (mine) setLive(mine);
    },
    [name],
  );
  useWatchRuns(job, onBatch, 50);
  const run = newest(live, loaded.value?.run);
  if (loaded.problem) return <ProblemBanner problem={loaded.problem} />;
  if (!run) return <p>Loading…</p>;
  const cancel = async () => {
    setProblem(undefined);
    try {
      const response = await jobService.cancelRun({ name, reason: "cancelled from the dashboard" });
      if (response.run) setLive(response.run);
    } catch (error) {
      setProblem(problemOf(error));
    }
  };
  const replay = async () => {
    setProblem(undefined);
    try {
      const response = await jobService.replayRun({ name });
      if (response.run) navigate(linkTo(response.run.name));
    } catch (error) {
      setProblem(problemOf(error));
    }
  };
  return (
    <section aria-labelledby="run-title">
      <header className="view-head">
        <h1 id="run-title" className="mono">
          {runTitle(run.name)}
        </h1>
        <span data-testid="run-state">
          <StateBadge state={run.state} />
        </span>
        <a href={linkTo(job)}>job {job.replace("jobs/", "")}</a>
      </header>
      <div className="toolbar" role="toolbar" aria-label="Run actions">
        <button type="button" className="danger" onClick={() => void cancel()} disabled={isTerminal(run.state) || run.state === RunState.CANCELLING}>
          Cancel run
        </button>
        <button type="button" onClick={() => void replay()} disabled={!REPLAYABLE.has(run.state)}>
          Replay
        </button>
      </div>
      <ProblemBanner problem={problem} />
      {run.error?.type ? (
        <div className="run-error" role="note">
          <strong>{run.error.type}</strong>: {run.error.message}
        </div>
      ) : null}
      {run.progressMessage || run.progress ? (
        <p>
          Progress {Math.round(run.progress * 100)}% {run.progressMessage}
        </p>
      ) : null}
      <div className="columns">
        <div>
          <h2>Timings</h2>
          <Timings run={run} />
        </div>
        <div>
          <h2>Attempts</h2>
          <Attempts run={run} />
        </div>
      </div>
      <LogTail name={name} />
    </section>
  );
}

function newest(a: Run | undefined, b: Run | undefined): Run | undefined {
  if (!a || !b) return a ?? b;
  return (millisOf(a.updateTime) ?? 0) >= (millisOf(b.updateTime) ?? 0) ? a : b;
}
