// The jobs list: filters (state, label, schedule kind, text) in the URL, and pages by the API's page tokens.
import { useState, type FormEvent } from "react";
import { JobStateBadge, Pager, ProblemBanner, TimeText, usePageTokens } from "../components";
import { searchService } from "../api";
import { jobFilter, NO_FILTERS, type JobFilters } from "../filters";
import { useLoad } from "../hooks";
import { link, linkTo, navigate, useRoute } from "../router";
import { describeSchedule } from "../schedule";

const PAGE_SIZE = 25;

function filtersOf(query: URLSearchParams): JobFilters {
  return {
    state: query.get("state") ?? "",
    kind: query.get("kind") ?? "",
    label: query.get("label") ?? "",
    text: query.get("text") ?? "",
    textIn: query.get("in") === "display_name" ? "display_name" : "name",
  };
}

export function Jobs() {
  const { query } = useRoute();
  const filters = filtersOf(query);
  const [draft, setDraft] = useState<JobFilters>(filters);
  const pages = usePageTokens();
  const token = pages.token;
  const filter = jobFilter(filters);
  const page = useLoad(
    () => searchService.listJobs({ filter, pageSize: PAGE_SIZE, pageToken: token, orderBy: "create_time desc" }),
    [filter, token],
  );
  const apply = (event: FormEvent) => {
    event.preventDefault();
    pages.reset();
    navigate(
      link(["jobs"], { state: draft.state, kind: draft.kind, label: draft.label, text: draft.text, in: draft.textIn === "name" ? "" : draft.textIn }),
    );
  };
  const set = (change: Partial<JobFilters>) => setDraft((before) => ({ ...before, ...change }));
  return (
    <section aria-labelledby="jobs-title">
      <header className="view-head">
        <h1 id="jobs-title">Jobs</h1>
        <a className="button" href="#/new">
          New job
        </a>
      </header>
      <form className="filters" onSubmit={apply} role="search" aria-label="Filter jobs">
        <label>
          State
          <select value={draft.state} onChange={(e) => set({ state: e.target.value })} name="state">
            <option value="">any</option>
            <option value="ACTIVE">active</option>
            <option value="PAUSED">paused</option>
            <option value="COMPLETED">completed</option>
          </select>
        </label>
        <label>
          Schedule
          <select value={draft.kind} onChange={(e) => set({ kind: e.target.value })} name="kind">
            <option value="">any</option>
            <option value="IMMEDIATE">immediate</option>
            <option value="RUN_AT">at a time</option>
            <option value="CRON">cron</option>
          </select>
        </label>
        <label>
          Label
          <input value={draft.label} onChange={(e) => set({ label: e.target.value })} placeholder="team=billing" name="label" />
        </label>
        <label>
          Text
          <input value={draft.text} onChange={(e) => set({ text: e.target.value })} placeholder="report" name="text" />
        </label>
        <label>
          in
          <select value={draft.textIn} onChange={(e) => set({ textIn: e.target.value === "display_name" ? "display_name" : "name" })} name="in">
            <option value="name">name</option>
            <option value="display_name">display name</option>
          </select>
        </label>
        <button type="submit">Apply</button>
        <button type="button" onClick={() => { setDraft(NO_FILTERS); pages.reset(); navigate("#/jobs"); }}>
          Clear
        </button>
      </form>
      {filter ? <p className="hint mono">filter: {filter}</p> : null}
      <ProblemBanner problem={page.problem} />
      <table className="list">
        <thead>
          <tr>
            <th scope="col">Job</th>
            <th scope="col">State</th>
            <th scope="col">Schedule</th>
            <th scope="col">Next run</th>
            <th scope="col">Labels</th>
          </tr>
        </thead>
        <tbody>
          {(page.value?.jobs ?? []).map((job) => (
            <tr key={job.name} data-job={job.name}>
              <td>
                <a href={linkTo(job.name)}>{job.displayName || job.name.replace("jobs/", "")}</a>
                {job.displayName ? <div className="hint mono">{job.name.replace("jobs/", "")}</div> : null}
              </td>
              <td>
                <JobStateBadge state={job.state} />
              </td>
              <td>{describeSchedule(job.schedule)}</td>
              <td data-column="next-run">
                <TimeText ts={job.nextRunTime} />
              </td>
              <td>
                <div className="labels">
                  {Object.entries(job.labels).map(([key, value]) => (
                    <span key={key} className="label">
                      {key}={value}
                    </span>
                  ))}
                </div>
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      {page.value && page.value.jobs.length === 0 ? <p className="empty">No jobs match.</p> : null}
      <Pager pages={pages} nextToken={page.value?.nextPageToken} />
    </section>
  );
}
