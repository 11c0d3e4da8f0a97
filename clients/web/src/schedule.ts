// A schedule in words. Cron expressions are described by cronstrue (5 fields, or 6 with leading seconds, as
// the server takes them); the macros the server accepts are named here.
import cronstrue from "cronstrue";
import type { Schedule } from "@gen/jobmesh/v1/job_pb.js";
import { formatTime } from "./time";

const MACROS: Record<string, string> = {
  "@yearly": "Once a year, at 00:00 on 1 January",
  "@annually": "Once a year, at 00:00 on 1 January",
  "@monthly": "At 00:00 on the first day of every month",
  "@weekly": "At 00:00 every Sunday",
  "@daily": "At 00:00 every day",
  "@midnight": "At 00:00 every day",
  "@hourly": "At the start of every hour",
};

export function describeCron(expression: string): string {
  const text = expression.trim().split(/\s+/).join(" ");
  const macro = MACROS[text.toLowerCase()];
  if (macro) return macro;
  try {
    return cronstrue.toString(text, { use24HourTimeFormat: true, throwExceptionOnParseError: true });
  } catch {
    return `“${text}” (not a cron expression this page can read)`;
  }
}

export function scheduleKind(schedule: Schedule | undefined): "immediate" | "runAt" | "cron" | "none" {
  return schedule?.kind.case ?? "none";
}

export function describeSchedule(schedule: Schedule | undefined): string {
  switch (schedule?.kind.case) {
    case "immediate":
      return "Once, as soon as it was created";
    case "runAt":
      return `Once, at ${formatTime(schedule.kind.value, "UTC")}`;
    case "cron": {
      const cron = schedule.kind.value;
      return `${describeCron(cron.expression)}, ${cron.timeZone || "UTC"} time`;
    }
    default:
      return "No schedule";
  }
}
