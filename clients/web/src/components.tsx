// Small pieces shared by the views.
import { useEffect, useRef, useState, type ReactNode } from "react";
import { useVirtualizer } from "@tanstack/react-virtual";
import { timestampDate, type Timestamp } from "@bufbuild/protobuf/wkt";
import { JobState } from "@gen/jobmesh/v1/job_pb.js";
import { RunState, type Run } from "@gen/jobmesh/v1/run_pb.js";
import type { Problem } from "./errors";
import type { Liveness } from "./hooks";
import { linkTo } from "./router";
import { durationMillis, formatClock, formatMillis, formatTime } from "./time";

export function runStateName(state: RunState): string {
  return (RunState[state] ?? "UNSPECIFIED").replace("_", " ");
}

export function jobStateName(state: JobState): string {
  return JobState[state] ?? "UNSPECIFIED";
}

export function StateBadge({ state }: { state: RunState }) {
  const name = RunState[state] ?? "UNSPECIFIED";
  return <span className={`badge state-${name.toLowerCase()}`}>{name.replace("_", " ")}</span>;
}

export function JobStateBadge({ state }: { state: JobState }) {
  const name = jobStateName(state);
  return <span className={`badge job-${name.toLowerCase()}`}>{name}</span>;
}

export function LiveDot({ liveness }: { liveness: Liveness }) {
  return (
    <span className={`live live-${liveness}`} role="status">
      {liveness === "live" ? "live" : liveness === "connecting" ? "connecting…" : "reconnecting…"}
    </span>
  );
}

export function ProblemBanner({ problem, children }: { problem?: Problem; children?: ReactNode }) {
  if (!problem && !children) return null;
  return (
    <div className="problem" role="alert">
      {children ?? problem?.message}
    </div>
  );
}

export function FieldError({ id, text }: { id: string; text: string }) {
  return text ? (
    <p className="field-error" id={id} role="alert">
      {text}
    </p>
  ) : null;
}

export function ConfirmDialog(props: {
  open: boolean;
  title: string;
  body: ReactNode;
  confirm: string;
  onConfirm: () => void;
  onClose: () => void;
}) {
  const dialog = useRef<HTMLDialogElement>(null);
  useEffect(() => {
    const element = dialog.current;
    if (!element) return;
    if (props.open && !element.open) element.showModal();
    if (!props.open && element.open) element.close();
  }, [props.open]);
  return (
    <dialog ref={dialog} onClose={props.onClose} aria-labelledby="confirm-title">
      <h2 id="confirm-title">{props.title}</h2>
      <div>{props.body}</div>
      <form method="dialog" className="actions">
        <button type="submit" autoFocus>
          Keep it
        </button>
        <button type="button" className="danger" onClick={props.onConfirm}>
          {props.confirm}
        </button>
      </form>
    </dialog>
  );
}

export function runTitle(name: string): string {
  const [, job = "", , run = ""] = name.split("/");
  return `${job} / ${run}`;
}

const ROW_HEIGHT = 34;

/** An instant as text (in `zone`, or the browser's), carrying its exact value for machines (`dateTime`). */
export function TimeText({ ts, zone }: { ts: Timestamp | undefined; zone?: string }) {
  return ts ? <time dateTime={timestampDate(ts).toISOString()}>{formatTime(ts, zone)}</time> : <>—</>;
}

/** Runs in a virtualised table: only the rows in view are in the page, however many runs there are. */
export function RunTable({
  runs,
  height,
  moved,
  label,
  empty = "No runs yet.",
}: {
  runs: readonly Run[];
  height: number;
  moved?: ReadonlySet<string>;
  label: string;
  empty?: ReactNode;
}) {
  const scroller = useRef<HTMLDivElement>(null);
  const rows = useVirtualizer({
    count: runs.length,
    getScrollElement: () => scroller.current,
    estimateSize: () => ROW_HEIGHT,
    overscan: 8,
  });
  return (
    <div className="runtable" role="table" aria-label={label} aria-rowcount={runs.length}>
      <div className="runtable-row runtable-head" role="row">
        <span role="columnheader">State</span>
        <span role="columnheader">Run</span>
        <span role="columnheader">Scheduled</span>
        <span role="columnheader">Started</span>
        <span role="columnheader">Lateness</span>
        <span role="columnheader">Attempt</span>
      </div>
      <div ref={scroller} className="runtable-body" style={{ height }} role="rowgroup">
        {runs.length === 0 ? <p className="empty">{empty}</p> : null}
        <div style={{ height: rows.getTotalSize(), position: "relative" }}>
          {rows.getVirtualItems().map((item) => {
            const run = runs[item.index];
            if (!run) return null;
            return (
              <div
                key={run.name}
                role="row"
                aria-rowindex={item.index + 1}
                data-run={run.name}
                data-state={RunState[run.state]}
                className={`runtable-row${moved?.has(run.name) ? " moved" : ""}`}
                style={{ transform: `translateY(${item.start}px)`, height: ROW_HEIGHT }}
              >
                <span role="cell">
                  <StateBadge state={run.state} />
                </span>
                <span role="cell" className="mono">
                  <a href={linkTo(run.name)}>{runTitle(run.name)}</a>
                </span>
                <span role="cell">{formatClock(run.scheduleTime)}</span>
                <span role="cell">{formatClock(run.startTime)}</span>
                <span role="cell">{formatMillis(durationMillis(run.lateness))}</span>
                <span role="cell">{run.attempt}</span>
              </div>
            );
          })}
        </div>
      </div>
    </div>
  );
}

/** The page tokens of a list: those of the pages before this one, then this one's ("" for the first). */
export function usePageTokens(): { token: string; count: number; back: () => void; next: (token: string) => void; reset: () => void } {
  const [tokens, setTokens] = useState<string[]>([""]);
  return {
    token: tokens.at(-1) ?? "",
    count: tokens.length,
    back: () => setTokens((before) => (before.length > 1 ? before.slice(0, -1) : before)),
    next: (token) => setTokens((before) => [...before, token]),
    reset: () => setTokens([""]),
  };
}

export function Pager({ pages, nextToken }: { pages: ReturnType<typeof usePageTokens>; nextToken?: string }) {
  return (
    <nav className="pager" aria-label="Pages">
      <button type="button" disabled={pages.count < 2} onClick={pages.back}>
        Previous
      </button>
      <span>Page {pages.count}</span>
      <button type="button" disabled={!nextToken} onClick={() => nextToken && pages.next(nextToken)}>
        Next
      </button>
    </nav>
  );
}

/** Radio buttons for one choice among a few. */
export function Choices<T extends string>(props: {
  name: string;
  label: string;
  value: T;
  options: readonly (readonly [T, string])[];
  onChange: (value: T) => void;
}) {
  return (
    <div className="choices" role="radiogroup" aria-label={props.label}>
      {props.options.map(([choice, text]) => (
        <label key={choice} className="choice">
          <input type="radio" name={props.name} value={choice} checked={props.value === choice} onChange={() => props.onChange(choice)} />
          {text}
        </label>
      ))}
    </div>
  );
}
