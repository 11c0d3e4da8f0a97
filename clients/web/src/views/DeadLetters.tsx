// Dead-lettered runs (every attempt of their retry policy failed), newest first, each with a replay.
import { useState } from "react";
import { jobService, searchService } from "../api";
import { Pager, ProblemBanner, runTitle, usePageTokens } from "../components";
import { problemOf, type Problem } from "../errors";
import { useLoad } from "../hooks";
import { linkTo } from "../router";
import { formatTime } from "../time";

const PAGE_SIZE = 25;

export function DeadLetters() {
  const pages = usePageTokens();
  const page = useLoad(
    () =>
      searchService.listRuns({
        parent: "jobs/-",
        filter: "state = DEAD_LETTERED",
        orderBy: "end_time desc",
        pageSize: PAGE_SIZE,
        pageToken: pages.token,
      }),
    [pages.token],
  );
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
        <button type="button" onClick={page.reload}>
          Refresh
        </button>
      </header>
      <p className="hint">Runs that failed every attempt their retry policy allowed. A replay runs one again, as a new run of its job.</p>
      <ProblemBanner problem={page.problem ?? problem} />
      <table className="list">
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
          {(page.value?.runs ?? []).map((run) => (
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
      {page.value && page.value.runs.length === 0 ? <p className="empty">No dead letters.</p> : null}
      <Pager pages={pages} nextToken={page.value?.nextPageToken} />
    </section>
  );
}
