// The job form's values, to and from a Job of the contract. Field paths are the API's (`job.schedule.cron
// .expression`), so that BadRequest field violations land next to the input they concern.
import { create } from "@bufbuild/protobuf";
import { DurationSchema, timestampDate, timestampFromDate } from "@bufbuild/protobuf/wkt";
import {
  JobSchema,
  Priority,
  RetryPolicySchema,
  ScheduleSchema,
  TargetSchema,
  type Job,
  type RetryPolicy,
  type Schedule,
  type Target,
} from "@gen/jobmesh/v1/job_pb.js";
import { joinCommand, splitCommand } from "./shellwords";
import { durationMillis } from "./time";

export type ScheduleChoice = "immediate" | "runAt" | "cron";
export type TargetChoice = "command" | "http" | "handler";

export type FormValues = {
  jobId: string;
  displayName: string;
  labels: string; // one key=value a line
  schedule: ScheduleChoice;
  runAt: string; // <input type=datetime-local> value, in the browser's time zone
  cron: string;
  timeZone: string;
  target: TargetChoice;
  command: string; // a command line, split as a shell would
  url: string;
  method: string;
  handler: string;
  maxAttempts: string;
  initialBackoff: string; // seconds
  executionTimeout: string; // seconds
  queue: string;
  priority: string; // a Priority name, or "" for normal
};

export const EMPTY_FORM: FormValues = {
  jobId: "",
  displayName: "",
  labels: "",
  schedule: "cron",
  runAt: "",
  cron: "*/5 * * * *",
  timeZone: "UTC",
  target: "command",
  command: "",
  url: "",
  method: "POST",
  handler: "",
  maxAttempts: "",
  initialBackoff: "",
  executionTimeout: "",
  queue: "",
  priority: "",
};

// The inputs and the field paths whose violations each one shows; the others are listed above the buttons.
export const FIELDS = {
  jobId: ["job_id"],
  displayName: ["job.display_name"],
  labels: ["job.labels"],
  runAt: ["job.schedule.run_at"],
  cron: ["job.schedule.cron.expression"],
  timeZone: ["job.schedule.cron.time_zone"],
  command: ["job.target.command"],
  url: ["job.target.http.url"],
  method: ["job.target.http.method"],
  handler: ["job.target.handler"],
  maxAttempts: ["job.retry_policy.max_attempts"],
  initialBackoff: ["job.retry_policy.initial_backoff"],
  executionTimeout: ["job.execution_timeout"],
  queue: ["job.queue"],
  priority: ["job.priority"],
} as const satisfies Record<string, readonly string[]>;

/** Problems found before asking the server (text it could not even be sent as). */
export class FormProblems extends Error {
  constructor(readonly fields: Record<string, string>) {
    super("the form has errors");
  }
}

function pad(n: number): string {
  return String(n).padStart(2, "0");
}

export function localInput(date: Date): string {
  return `${date.getFullYear()}-${pad(date.getMonth() + 1)}-${pad(date.getDate())}T${pad(date.getHours())}:${pad(date.getMinutes())}`;
}

function labelsOf(text: string, problems: Record<string, string>): Record<string, string> {
  const labels: Record<string, string> = {};
  for (const line of text.split("\n").map((l) => l.trim()).filter(Boolean)) {
    const at = line.indexOf("=");
    if (at < 1) problems["job.labels"] = `“${line}” is not key=value`;
    else labels[line.slice(0, at).trim()] = line.slice(at + 1).trim();
  }
  return labels;
}

function seconds(text: string, field: string, problems: Record<string, string>) {
  if (!text.trim()) return undefined;
  const value = Number(text);
  if (!Number.isFinite(value)) {
    problems[field] = `“${text}” is not a number of seconds`;
    return undefined;
  }
  const whole = Math.trunc(value);
  return create(DurationSchema, { seconds: BigInt(whole), nanos: Math.round((value - whole) * 1e9) });
}

/** Whether the form asks for a run at a time already passed: the server accepts it and the run starts at
 * once, so the form warns before it is sent. */
export function runAtHasPassed(values: FormValues, nowMs: number): boolean {
  if (values.schedule !== "runAt" || !values.runAt) return false;
  const when = new Date(values.runAt).getTime();
  return !Number.isNaN(when) && when <= nowMs;
}

function scheduleOf(values: FormValues, problems: Record<string, string>): Schedule | undefined {
  if (values.schedule === "immediate") return create(ScheduleSchema, { kind: { case: "immediate", value: {} } });
  if (values.schedule === "cron") {
    const cron = { expression: values.cron.trim(), timeZone: values.timeZone.trim() };
    return create(ScheduleSchema, { kind: { case: "cron", value: cron } });
  }
  const when = values.runAt ? new Date(values.runAt) : undefined;
  if (!when || Number.isNaN(when.getTime())) {
    problems["job.schedule.run_at"] = "a date and time is required";
    return undefined;
  }
  return create(ScheduleSchema, { kind: { case: "runAt", value: timestampFromDate(when) } });
}

function targetOf(values: FormValues, problems: Record<string, string>): Target {
  if (values.target === "http") {
    return create(TargetSchema, { kind: { case: "http", value: { url: values.url.trim(), method: values.method } } });
  }
  if (values.target === "handler") {
    return create(TargetSchema, { kind: { case: "handler", value: { name: values.handler.trim() } } });
  }
  let argv: string[] = [];
  try {
    argv = splitCommand(values.command);
  } catch (error) {
    problems["job.target.command.argv"] = (error as Error).message;
  }
  return create(TargetSchema, { kind: { case: "command", value: { argv } } });
}

function retryOf(values: FormValues, problems: Record<string, string>): RetryPolicy | undefined {
  const attempts = values.maxAttempts.trim() ? Number(values.maxAttempts) : 0;
  if (!Number.isInteger(attempts)) problems["job.retry_policy.max_attempts"] = "a whole number";
  const initialBackoff = seconds(values.initialBackoff, "job.retry_policy.initial_backoff", problems);
  return attempts || initialBackoff ? create(RetryPolicySchema, { maxAttempts: attempts, initialBackoff }) : undefined;
}

/** The Job the form describes; throws FormProblems for text that cannot be turned into one. */
export function jobOf(values: FormValues): Job {
  const problems: Record<string, string> = {};
  const job = create(JobSchema, {
    displayName: values.displayName.trim(),
    labels: labelsOf(values.labels, problems),
    schedule: scheduleOf(values, problems),
    target: targetOf(values, problems),
    retryPolicy: retryOf(values, problems),
    executionTimeout: seconds(values.executionTimeout, "job.execution_timeout", problems),
    queue: values.queue.trim(),
    priority: values.priority ? Priority[values.priority as keyof typeof Priority] : Priority.UNSPECIFIED,
  });
  if (Object.keys(problems).length) throw new FormProblems(problems);
  return job;
}

/** The form's values for an existing job (for editing). */
export function valuesOf(job: Job): FormValues {
  const values: FormValues = { ...EMPTY_FORM, jobId: job.name.replace("jobs/", ""), displayName: job.displayName };
  values.labels = Object.entries(job.labels).map(([k, v]) => `${k}=${v}`).join("\n");
  const kind = job.schedule?.kind;
  if (kind?.case === "immediate") values.schedule = "immediate";
  else if (kind?.case === "runAt") {
    values.schedule = "runAt";
    values.runAt = localInput(timestampDate(kind.value));
  } else if (kind?.case === "cron") {
    values.cron = kind.value.expression;
    values.timeZone = kind.value.timeZone || "UTC";
  }
  const target = job.target?.kind;
  if (target?.case === "command") values.command = joinCommand(target.value.argv);
  else if (target?.case === "http") Object.assign(values, { target: "http", url: target.value.url, method: target.value.method || "POST" });
  else if (target?.case === "handler") Object.assign(values, { target: "handler", handler: target.value.name });
  values.maxAttempts = job.retryPolicy?.maxAttempts ? String(job.retryPolicy.maxAttempts) : "";
  const backoff = durationMillis(job.retryPolicy?.initialBackoff);
  values.initialBackoff = backoff === undefined ? "" : String(backoff / 1000);
  const timeout = durationMillis(job.executionTimeout);
  values.executionTimeout = timeout === undefined ? "" : String(timeout / 1000);
  values.queue = job.queue;
  values.priority = job.priority ? (Priority[job.priority] ?? "") : "";
  return values;
}
