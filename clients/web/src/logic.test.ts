import { create } from "@bufbuild/protobuf";
import { DurationSchema, timestampFromMs } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError } from "@connectrpc/connect";
import { BadRequestSchema, ErrorInfoSchema } from "@gen/google/rpc/error_details_pb.js";
import { RunSchema, RunState, type Run } from "@gen/jobmesh/v1/run_pb.js";
import { RunCountSchema, RunCountsSchema } from "@gen/jobmesh/v1/search_service_pb.js";
import { describe, expect, it } from "vitest";
import { formatCount, stateTotals } from "./counts";
import { conflictMessage, jobIdTaken, problemOf, unclaimed, violationFor } from "./errors";
import { jobFilter, NO_FILTERS } from "./filters";
import { EMPTY_FORM, FormProblems, jobOf, runAtHasPassed, valuesOf } from "./jobform";
import { RunBook } from "./runbook";
import { envEntries } from "./secrets";
import { describeCron } from "./schedule";
import { joinCommand, splitCommand } from "./shellwords";
import { LatenessWindow, quantile } from "./stats";
import { tokenInterceptor } from "./token";

function run(name: string, state: RunState, updateMs: number, extra: Partial<Pick<Run, "startTime" | "lateness">> = {}): Run {
  return create(RunSchema, { name, state, updateTime: timestampFromMs(updateMs), ...extra });
}

describe("quantiles and the lateness window", () => {
  it("takes the nearest rank", () => {
    expect(quantile([], 0.5)).toBeUndefined();
    expect(quantile([1, 2, 3, 4], 0.5)).toBe(2);
    expect(quantile([...Array(100).keys()], 0.99)).toBe(98);
  });

  it("keeps only the last minute and buckets the rest", () => {
    const window = new LatenessWindow();
    window.set("a", 1_000, 5000); // older than a minute at 70 s
    window.set("b", 65_000, 0.5);
    window.set("c", 66_000, 1);
    window.set("c", 66_000, 50); // c's later figure replaces its first
    window.set("d", 69_000, 3000);
    const summary = window.summary(70_000);
    expect(summary.count).toBe(3);
    expect(summary.p50).toBe(50);
    expect(summary.p99).toBe(3000);
    expect(summary.histogram).toEqual([1, 0, 1, 0, 0, 1]);
    expect(summary.spark.filter((v) => v !== undefined)).toHaveLength(2);
  });
});

describe("the board's run book", () => {
  it("keeps each run once, in its latest state, and ignores an older version arriving late", () => {
    const book = new RunBook();
    book.apply([run("jobs/a/runs/1", RunState.SCHEDULED, 1), run("jobs/a/runs/2", RunState.SCHEDULED, 1)], 0);
    const moved = book.apply([run("jobs/a/runs/1", RunState.RUNNING, 2), run("jobs/a/runs/2", RunState.SCHEDULED, 1)], 0);
    expect([...moved]).toEqual(["jobs/a/runs/1"]);
    book.apply([run("jobs/a/runs/1", RunState.QUEUED, 1)], 0); // stale
    expect(book.recent(10).map((r) => r.state)).toEqual([RunState.RUNNING, RunState.SCHEDULED]);
    expect(book.recent(10).map((r) => r.name)).toEqual(["jobs/a/runs/1", "jobs/a/runs/2"]);
  });

  it("drops finished runs first past its capacity", () => {
    const book = new RunBook(2);
    book.apply([run("jobs/a/runs/1", RunState.SUCCEEDED, 1), run("jobs/a/runs/2", RunState.RUNNING, 1)], 0);
    book.apply([run("jobs/a/runs/3", RunState.RUNNING, 1)], 0);
    expect(book.size).toBe(2);
    expect(book.recent(10).map((r) => r.name)).toEqual(["jobs/a/runs/3", "jobs/a/runs/2"]);
  });

  it("keeps one lateness per started run, its latest", () => {
    const book = new RunBook();
    const startTime = timestampFromMs(Date.now());
    const claimed = { startTime, lateness: create(DurationSchema, {}) };
    const reported = { startTime, lateness: create(DurationSchema, { nanos: 3_000_000 }) };
    book.apply([run("jobs/a/runs/0", RunState.SCHEDULED, 1)], 0);
    book.apply([run("jobs/a/runs/1", RunState.RUNNING, 1, claimed)], 0);
    book.apply([run("jobs/a/runs/1", RunState.SUCCEEDED, 2, reported)], 0);
    const summary = book.lateness.summary(Date.now());
    expect(summary.count).toBe(1);
    expect(summary.p50).toBe(3);
  });
});

describe("command lines", () => {
  it("splits as a shell would, without expanding", () => {
    expect(splitCommand(`sh -c 'echo "hi there"; sleep 1' a\\ b "x\\"y" ''`)).toEqual(["sh", "-c", 'echo "hi there"; sleep 1', "a b", 'x"y', ""]);
    expect(() => splitCommand("echo 'open")).toThrow("unclosed");
  });

  it("joins back to the same argv", () => {
    const argv = ["sh", "-c", "echo it's $HOME", "plain"];
    expect(splitCommand(joinCommand(argv))).toEqual(argv);
  });
});

describe("the jobs list's filter", () => {
  it("joins the controls with AND, quoting values", () => {
    expect(jobFilter(NO_FILTERS)).toBe("");
    expect(jobFilter({ state: "ACTIVE", kind: "CRON", label: "team = bill\"ing", text: "Rep", textIn: "name" })).toBe(
      'state = ACTIVE AND schedule = CRON AND labels.team = "bill\\"ing" AND name = "jobs/*rep*"',
    );
    expect(jobFilter({ ...NO_FILTERS, label: "tier", text: "Night*", textIn: "display_name" })).toBe(
      'labels:tier AND display_name = "*Night*"',
    );
  });
});

describe("API errors", () => {
  it("reads BadRequest field violations and ErrorInfo from the details", () => {
    const error = new ConnectError("bad job", Code.InvalidArgument, undefined, [
      { desc: BadRequestSchema, value: { fieldViolations: [{ field: "job.schedule.cron.expression", description: "not valid" }, { field: "job_id", description: "too long" }] } },
      { desc: ErrorInfoSchema, value: { reason: "INVALID_ARGUMENT", domain: "jobmesh.dev" } },
    ]);
    const problem = problemOf(error);
    expect(problem.fields["job.schedule.cron.expression"]).toBe("not valid");
    expect(violationFor(problem.fields, ["job.schedule.cron"])).toBe("not valid");
    expect(violationFor(problem.fields, ["job.schedule.cron.time_zone"])).toBe("");
    expect(unclaimed(problem.fields, ["job.schedule"])).toEqual(["job_id: too long"]);
    expect(problem.reason).toBe("INVALID_ARGUMENT");
  });

  it("turns a stale etag into a conflict message, and nothing else", () => {
    const stale = new ConnectError("etag", Code.Aborted, undefined, [
      { desc: ErrorInfoSchema, value: { reason: "ETAG_MISMATCH", metadata: { current_etag: "2" } } },
    ]);
    expect(conflictMessage(problemOf(stale), "1")).toContain("version 1; it is now at version 2");
    expect(conflictMessage(problemOf(new ConnectError("x", Code.Aborted)), "1")).toBeUndefined();
  });

  it("says a taken job id at its field, and nothing for a reused request id or another error", () => {
    const taken = new ConnectError("jobs/nightly already exists", Code.AlreadyExists, undefined, [
      { desc: ErrorInfoSchema, value: { reason: "ALREADY_EXISTS", metadata: { resource: "jobs/nightly" } } },
    ]);
    expect(jobIdTaken(problemOf(taken), "nightly")).toContain('the id "nightly" already exists');
    expect(jobIdTaken(problemOf(taken), "")).toBeUndefined();
    const reused = new ConnectError("request id reused", Code.AlreadyExists, undefined, [
      { desc: ErrorInfoSchema, value: { reason: "REQUEST_ID_REUSED" } },
    ]);
    expect(jobIdTaken(problemOf(reused), "nightly")).toBeUndefined();
    expect(jobIdTaken(problemOf(new ConnectError("bad", Code.InvalidArgument)), "nightly")).toBeUndefined();
  });
});

describe("the job form", () => {
  it("makes a cron job with its time zone and retry policy", () => {
    const job = jobOf({ ...EMPTY_FORM, cron: "0 3 * * *", timeZone: "Europe/Paris", command: "echo hi", labels: "team=billing", maxAttempts: "3", initialBackoff: "1.5" });
    expect(job.schedule?.kind).toMatchObject({ case: "cron", value: { expression: "0 3 * * *", timeZone: "Europe/Paris" } });
    expect(job.target?.kind).toMatchObject({ case: "command", value: { argv: ["echo", "hi"] } });
    expect(job.labels).toEqual({ team: "billing" });
    expect(job.retryPolicy?.maxAttempts).toBe(3);
    expect(job.retryPolicy?.initialBackoff).toMatchObject({ seconds: 1n, nanos: 500_000_000 });
    expect(valuesOf(job)).toMatchObject({ cron: "0 3 * * *", timeZone: "Europe/Paris", command: "echo hi", labels: "team=billing", maxAttempts: "3", initialBackoff: "1.5" });
  });

  it("refuses what it cannot send, by field", () => {
    try {
      jobOf({ ...EMPTY_FORM, schedule: "runAt", runAt: "", labels: "no-equals", command: "echo 'x" });
      expect.unreachable();
    } catch (error) {
      expect(error).toBeInstanceOf(FormProblems);
      expect(Object.keys((error as FormProblems).fields).sort()).toEqual(["job.labels", "job.schedule.run_at", "job.target.command.argv"]);
    }
  });
});

describe("schedules in words", () => {
  it("describes cron expressions and macros", () => {
    expect(describeCron("*/2 * * * * *")).toBe("Every 2 seconds");
    expect(describeCron("0 3 * * *")).toBe("At 03:00");
    expect(describeCron("@hourly")).toBe("At the start of every hour");
    expect(describeCron("not cron")).toContain("not a cron expression");
  });
});

describe("the API token", () => {
  it("is sent as a bearer token only when configured", async () => {
    const seen: (string | null)[] = [];
    for (const token of ["", "  secret "]) {
      const call = tokenInterceptor(() => token)(async (request) => {
        seen.push(request.header.get("authorization"));
        return {} as never;
      });
      await call({ header: new Headers() } as never);
    }
    expect(seen).toEqual([null, "Bearer secret"]);
  });
});

describe("a command's environment on the job page", () => {
  it("shows a secret reference by its name only, plain values as they are", () => {
    const entries = envEntries({ TOKEN: "secret://API_TOKEN", MODE: "fast", ODD: "secret://" });
    expect(entries).toEqual([
      { name: "MODE", value: "fast" },
      { name: "ODD", secret: "?" },
      { name: "TOKEN", secret: "API_TOKEN" },
    ]);
    expect(JSON.stringify(entries)).not.toContain("secret://");
  });
});

describe("a run at a time already passed", () => {
  const now = new Date("2026-12-05T10:00:00").getTime();
  it("is warned about only for a one-shot time at or before now", () => {
    expect(runAtHasPassed({ ...EMPTY_FORM, schedule: "runAt", runAt: "2026-12-05T09:59" }, now)).toBe(true);
    expect(runAtHasPassed({ ...EMPTY_FORM, schedule: "runAt", runAt: "2026-12-05T10:00" }, now)).toBe(true);
    expect(runAtHasPassed({ ...EMPTY_FORM, schedule: "runAt", runAt: "2026-12-05T10:01" }, now)).toBe(false);
    expect(runAtHasPassed({ ...EMPTY_FORM, schedule: "cron", runAt: "2026-12-05T09:59" }, now)).toBe(false);
    expect(runAtHasPassed({ ...EMPTY_FORM, schedule: "runAt", runAt: "" }, now)).toBe(false);
    expect(runAtHasPassed({ ...EMPTY_FORM, schedule: "runAt", runAt: "not a time" }, now)).toBe(false);
  });
});

describe("the mesh's counts on the board", () => {
  it("adds each state up over namespaces and queues, and keeps upcoming runs apart", () => {
    const counts = create(RunCountsSchema, {
      counts: [
        create(RunCountSchema, { namespace: "a", queue: "q", state: RunState.SCHEDULED, runCount: 2n, upcomingRunCount: 40n }),
        create(RunCountSchema, { namespace: "a", queue: "r", state: RunState.DEAD_LETTERED, runCount: 3n }),
        create(RunCountSchema, { namespace: "b", queue: "q", state: RunState.DEAD_LETTERED, runCount: 1500n }),
        create(RunCountSchema, { namespace: "b", queue: "q", state: RunState.SCHEDULED, runCount: 0n, upcomingRunCount: 2n }),
      ],
    });
    const totals = stateTotals(counts);
    expect(totals.byState.get(RunState.DEAD_LETTERED)).toBe(1503n);
    expect(totals.byState.get(RunState.SCHEDULED)).toBe(2n);
    expect(totals.byState.get(RunState.RUNNING)).toBeUndefined();
    expect(totals.upcoming).toBe(42n);
    expect(formatCount(1503n)).toBe("1,503");
  });

  it("counts nothing from empty counts", () => {
    const totals = stateTotals(create(RunCountsSchema, {}));
    expect(totals.byState.size).toBe(0);
    expect(totals.upcoming).toBe(0n);
  });
});
