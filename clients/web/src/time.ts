// Times and durations as people read them. Instants are shown in a given IANA zone (a job's), else the
// browser's.
import type { Duration, Timestamp } from "@bufbuild/protobuf/wkt";
import { timestampDate } from "@bufbuild/protobuf/wkt";

export function millisOf(ts: Timestamp | undefined): number | undefined {
  return ts ? timestampDate(ts).getTime() : undefined;
}

export function durationMillis(duration: Duration | undefined): number | undefined {
  if (!duration) return undefined;
  return Number(duration.seconds) * 1000 + duration.nanos / 1e6;
}

export function formatMillis(ms: number | undefined): string {
  if (ms === undefined) return "—";
  const abs = Math.abs(ms);
  if (abs < 1) return `${ms.toFixed(2)} ms`;
  if (abs < 1000) return `${Math.round(ms)} ms`;
  if (abs < 60_000) return `${(ms / 1000).toFixed(abs < 10_000 ? 2 : 1)} s`;
  if (abs < 3_600_000) return `${Math.floor(ms / 60_000)} min ${Math.round((abs % 60_000) / 1000)} s`;
  return `${(ms / 3_600_000).toFixed(1)} h`;
}

export function formatDuration(duration: Duration | undefined): string {
  return formatMillis(durationMillis(duration));
}

const formats = new Map<string, Intl.DateTimeFormat>();

function formatIn(zone: string | undefined): Intl.DateTimeFormat {
  const key = zone ?? "";
  let format = formats.get(key);
  if (!format) {
    format = new Intl.DateTimeFormat("en-GB", {
      timeZone: zone,
      year: "numeric",
      month: "short",
      day: "2-digit",
      weekday: "short",
      hour: "2-digit",
      minute: "2-digit",
      second: "2-digit",
      timeZoneName: "short",
    });
    formats.set(key, format);
  }
  return format;
}

export function formatTime(ts: Timestamp | undefined, zone?: string): string {
  return ts ? formatIn(zone).format(timestampDate(ts)) : "—";
}

const clock = new Intl.DateTimeFormat("en-GB", { hour: "2-digit", minute: "2-digit", second: "2-digit" });

export function formatClock(ts: Timestamp | undefined): string {
  return ts ? clock.format(timestampDate(ts)) : "—";
}

const logClock = new Intl.DateTimeFormat("en-GB", {
  hour: "2-digit",
  minute: "2-digit",
  second: "2-digit",
  fractionalSecondDigits: 3,
  hourCycle: "h23",
});

/** A log line's time of day to the millisecond, in the browser's zone: lines a few ms apart stay apart. */
export function formatLogTime(ts: Timestamp | undefined): string {
  return ts ? logClock.format(timestampDate(ts)) : "";
}

/** An instant as ISO 8601 in UTC, for a `<time dateTime>` ("" for none). */
export function isoOf(ts: Timestamp | undefined): string {
  return ts ? timestampDate(ts).toISOString() : "";
}

/** A duration proto from seconds typed in a form ("" for none). */
export function secondsText(duration: Duration | undefined): string {
  const ms = durationMillis(duration);
  return ms === undefined ? "" : String(ms / 1000);
}
