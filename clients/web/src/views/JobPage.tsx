// A job: its schedule in words with the next 5 fire times in its time zone (PreviewSchedule), its target and
// policies, its controls (run now, pause/resume, edit, delete), its runs, live, and its audit trail.
import { useCallback, useRef, useState } from "react";
import { AuditAction } from "@gen/jobmesh/v1/audit_pb.js";
import { JobState, OverlapPolicy, Priority, type Job } from "@gen/jobmesh/v1/job_pb.js";
import type { Run } from "@gen/jobmesh/v1/run_pb.js";
import { jobService, searchService } from "../api";
import { ConfirmDialog, JobStateBadge, LiveDot, ProblemBanner, RunTable, TimeText } from "../components";
import { problemOf, type Problem } from "../errors";
import { useLoad, useWatchRuns } from "../hooks";
import { RunBook } from "../runbook";
import { link, linkTo, navigate } from "../router";
import { describeSchedule } from "../schedule";
import { envEntries } from "../secrets";
import { joinCommand } from "../shellwords";
import { formatDuration, formatTime } from "../time";

function targetText(job: Job): string {
  const target = job.target?.kind;
  if (target?.case === "command") return `command: ${joinCommand(target.value.argv)}`;
  if (target?.case === "http") return `webhook: ${target.value.method || "POST"} ${target.value.url}`;
  if (target?.case === "handler") return `handler: ${target.value.name}`;
  return "none";
}

function Details({ job }: { job: Job }) {
  const retry = job.retryPolicy;
  const cron = job.schedule?.kind.case === "cron" ? job.schedule.kind.value : undefined;
  return (
    <dl className="details">
      <dt>Target</dt>
      <dd className="mono">{targetText(job)}</dd>
      {job.target?.kind.case === "command" && Object.keys(job.target.kind.value.env).length > 0 ? (
        <>
          <dt>Environment</dt>
          <dd className="labels">
            {envEntries(job.target.kind.value.env).map((entry) =>
              entry.secret !== undefined ? (
                <span key={entry.name} className="label mono" data-secret={entry.secret}>
                  {entry.name}=<span className="badge secret" title="resolved by the executor; never shown">secret {entry.secret}</span>
                </span>
              ) : (
                <span key={entry.name} className="label mono">
                  {entry.name}={entry.value}
                </span>
              ),
            )}
          </dd>
        </>
      ) : null}
      <dt>Retries</dt>
      <dd>
        {retry && retry.maxAttempts > 1
          ? `${retry.maxAttempts} attempts in all, first backoff ${retry.initialBackoff ? formatDuration(retry.initialBackoff) : "1 s"} ×${retry.backoffMultiplier || 2}`
          : "one attempt, no retry"}
      </dd>
      <dt>Timeouts</dt>
      <dd>
        execution {job.executionTimeout ? formatDuration(job.executionTimeout) : "none"}, heartbeat{" "}
        {job.heartbeatTimeout ? formatDuration(job.heartbeatTimeout) : "15 s"}
      </dd>
      {cron ? (
        <>
          <dt>Overlap</dt>
          <dd>{(OverlapPolicy[cron.overlapPolicy] ?? "SKIP").replace("UNSPECIFIED", "SKIP").toLowerCase().replaceAll("_", " ")}</dd>
        </>
      ) : null}
      <dt>Namespace</dt>
      <dd className="mono">{job.namespace || "default"}</dd>
      <dt>Queue, priority</dt>
      <dd>
        {job.queue || "default"}, {(Priority[job.priority] ?? "NORMAL").replace("UNSPECIFIED", "NORMAL").toLowerCase()}
      </dd>
      <dt>Labels</dt>
      <dd className="labels">
        {Object.entries(job.labels).map(([key, value]) => (
          <span key={key} className="label">
            {key}={value}
          </span>
        ))}
        {Object.keys(job.labels).length === 0 ? "none" : null}
      </dd>
      <dt>Created, changed</dt>
      <dd>
        {formatTime(job.createTime)}; {formatTime(job.updateTime)} (version {job.etag})
      </dd>
    </dl>
  );
}

function NextFireTimes({ job }: { job: Job }) {
  const preview = useLoad(() => searchService.previewSchedule({ schedule: job.schedule, count: 5 }), [job.etag, job.name]);
  const zone = preview.value?.timeZone ?? "UTC";
  return (
    <div>
      <h2>Next fire times ({zone})</h2>
      <ProblemBanner problem={preview.problem} />
      {preview.value && preview.value.fireTimes.length === 0 ? <p>None: the schedule has no occurrence ahead.</p> : null}
      <ol className="fire-times" aria-label="Next fire times">
        {(preview.value?.fireTimes ?? []).map((time) => (
          <li key={String(time.seconds)}>
            <TimeText ts={time} zone={zone} />
          </li>
        ))}
      </ol>
      {job.state === JobState.PAUSED ? <p className="hint">Paused: none of these will run until it is resumed.</p> : null}
    </div>
  );
}

/** The runs made ahead of their time, still SCHEDULED (ListRuns' `showUpcoming`): left out of the live runs,
 * shown here only when asked for. */
function UpcomingRuns({ name }: { name: string }) {
  const [shown, setShown] = useState(false);
  return (
    <div>
      <h2>Upcoming runs</h2>
      <button type="button" aria-pressed={shown} onClick={() => setShown((now) => !now)}>
        {shown ? "Hide upcoming runs" : "Show upcoming runs"}
      </button>
      {shown ? <UpcomingList name={name} /> : null}
    </div>
  );
}

function UpcomingList({ name }: { name: string }) {
  const upcoming = useLoad(
    () =>
      searchService.listRuns({
        parent: name,
        showUpcoming: true,
        filter: `state = SCHEDULED AND schedule_time > "${new Date().toISOString()}"`,
        orderBy: "schedule_time",
        pageSize: 100,
      }),
    [name],
  );
  return (
    <>
      <ProblemBanner problem={upcoming.problem} />
      <RunTable runs={upcoming.value?.runs ?? []} height={200} label="Upcoming runs of this job" empty="No upcoming runs." />
    </>
  );
}

function JobRuns({ name }: { name: string }) {
  const book = useRef(new RunBook(2000));
  const [, setVersion] = useState(0);
  const onBatch = useCallback((runs: Run[]) => {
    book.current.apply(runs, Date.now());
    setVersion((n) => n + 1);
  }, []);
  const liveness = useWatchRuns(name, onBatch, 200);
  return (
    <div>
      <h2>
        Runs <LiveDot liveness={liveness} />
      </h2>
      <RunTable runs={book.current.recent(2000)} height={320} label="Runs of this job" />
    </div>
  );
}

/** Who changed the job and its runs, newest first (ListAuditEvents); `changes` counts this page's own actions,
 * so the trail is read again after each. */
function JobAudit({ name, etag, changes }: { name: string; etag: string; changes: number }) {
  const trail = useLoad(
    () => searchService.listAuditEvents({ filter: `job = "${name}"`, pageSize: 50 }),
    [name, etag, changes],
  );
  const events = trail.value?.auditEvents ?? [];
  return (
    <div>
      <h2>Audit trail</h2>
      <ProblemBanner problem={trail.problem} />
      <table className="list" aria-label="Audit trail">
        <thead>
          <tr>
            <th scope="col">When</th>
            <th scope="col">Who</th>
            <th scope="col">What</th>
            <th scope="col">Resource</th>
            <th scope="col">Request id</th>
          </tr>
        </thead>
        <tbody>
          {events.map((event) => (
            <tr key={event.name} data-action={AuditAction[event.action]}>
              <td>{formatTime(event.time)}</td>
              <td className="mono">{event.actor}</td>
              <td>{(AuditAction[event.action] ?? "").toLowerCase().replaceAll("_", " ")}</td>
              <td className="mono">{event.resource.startsWith(`${name}/`) ? <a href={linkTo(event.resource)}>{event.resource}</a> : event.resource}</td>
              <td className="mono">{event.requestId}</td>
            </tr>
          ))}
        </tbody>
      </table>
      {trail.value && events.length === 0 ? <p className="empty">No changes recorded.</p> : null}
    </div>
  );
}

export function JobPage({ name }: { name: string }) {
  const loaded = useLoad(() => jobService.getJob({ name }), [name]);
  const [problem, setProblem] = useState<Problem>();
  const [notice, setNotice] = useState<{ text: string; href?: string }>();
  const [deleting, setDeleting] = useState(false);
  const [changes, setChanges] = useState(0);
  const job = loaded.value?.job;
  if (loaded.problem) return <ProblemBanner problem={loaded.problem} />;
  if (!job) return <p>Loading…</p>;
  const act = async (action: () => Promise<unknown>, done: string) => {
    setProblem(undefined);
    try {
      await action();
      setNotice({ text: done });
      setChanges((n) => n + 1);
      loaded.reload();
    } catch (error) {
      setProblem(problemOf(error));
    }
  };
  const runNow = async () => {
    setProblem(undefined);
    try {
      const { run } = await jobService.runJobNow({ name });
      setNotice({ text: "Started a run now:", href: run?.name });
      setChanges((n) => n + 1);
    } catch (error) {
      setProblem(problemOf(error));
    }
  };
  const remove = async () => {
    setDeleting(false);
    try {
      const response = await jobService.deleteJob({ name, etag: job.etag });
      setNotice({ text: `Deleted; ${response.cancelledRunCount} pending or running runs were cancelled.` });
      navigate(link(["jobs"]));
    } catch (error) {
      setProblem(problemOf(error));
    }
  };
  const paused = job.state === JobState.PAUSED;
  const gone = job.state === JobState.DELETED;
  return (
    <section aria-labelledby="job-title">
      <header className="view-head">
        <h1 id="job-title">{job.displayName || job.name.replace("jobs/", "")}</h1>
        <JobStateBadge state={job.state} />
        <span className="mono hint">{job.name}</span>
      </header>
      <div className="toolbar" role="toolbar" aria-label="Job actions">
        <button type="button" onClick={() => void runNow()} disabled={gone}>
          Run now
        </button>
        {paused ? (
          <button type="button" onClick={() => void act(() => jobService.resumeJob({ name }), "Resumed.")}>
            Resume
          </button>
        ) : (
          <button type="button" onClick={() => void act(() => jobService.pauseJob({ name }), "Paused.")} disabled={gone || job.state === JobState.COMPLETED}>
            Pause
          </button>
        )}
        <a className="button" href={link(["jobs", name.replace("jobs/", ""), "edit"])}>
          Edit
        </a>
        <button type="button" className="danger" onClick={() => setDeleting(true)} disabled={gone}>
          Delete…
        </button>
      </div>
      {notice ? (
        <p className="notice" role="status">
          {notice.text} {notice.href ? <a href={linkTo(notice.href)}>{notice.href}</a> : null}
        </p>
      ) : null}
      <ProblemBanner problem={problem} />
      <div className="columns">
        <div>
          <h2>Schedule</h2>
          <p className="schedule-words">{describeSchedule(job.schedule)}</p>
          <p data-figure="next-run">
            Next run: <TimeText ts={job.nextRunTime} />
          </p>
          <NextFireTimes job={job} />
        </div>
        <div>
          <h2>Target and policies</h2>
          <Details job={job} />
        </div>
      </div>
      <JobRuns name={name} />
      <UpcomingRuns name={name} />
      <JobAudit name={name} etag={job.etag} changes={changes} />
      <ConfirmDialog
        open={deleting}
        title={`Delete ${name.replace("jobs/", "")}?`}
        body={<p>Its pending and running runs are cancelled; its history is kept. This cannot be undone.</p>}
        confirm="Delete the job"
        onConfirm={() => void remove()}
        onClose={() => setDeleting(false)}
      />
    </section>
  );
}
