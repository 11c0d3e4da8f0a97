// Live data: WatchRuns with batched updates and reconnection, TailRunLogs following, and one-shot loads.
import { useCallback, useEffect, useRef, useState } from "react";
import type { LogLine, Run } from "@gen/jobmesh/v1/run_pb.js";
import type { RunCounts } from "@gen/jobmesh/v1/search_service_pb.js";
import { searchService } from "./api";
import { problemOf, type Problem } from "./errors";

export type Liveness = "connecting" | "live" | "reconnecting";
// Changes are handed to React at most this often: a busy mesh sends dozens a second.
export const FLUSH_MS = 250;
const MAX_BACKOFF_MS = 10_000;

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = window.setTimeout(resolve, ms);
    signal.addEventListener("abort", () => {
      window.clearTimeout(timer);
      resolve();
    });
  });
}

/** Follows `open()`'s stream for as long as the component lives, reopening it (after a backoff) when it
 * ends or fails; items reach `onBatch` in batches, at most every FLUSH_MS. */
function useBatchedStream<T>(
  open: (signal: AbortSignal) => AsyncIterable<T[]>,
  onBatch: (items: T[]) => void,
  key: string,
): Liveness {
  const [liveness, setLiveness] = useState<Liveness>("connecting");
  const handler = useRef(onBatch);
  handler.current = onBatch;
  const opener = useRef(open);
  opener.current = open;
  useEffect(() => {
    const abort = new AbortController();
    let pending: T[] = [];
    let timer = 0;
    const flush = () => {
      timer = 0;
      const batch = pending;
      pending = [];
      if (batch.length) handler.current(batch);
    };
    void (async () => {
      let backoff = 500;
      while (!abort.signal.aborted) {
        try {
          for await (const items of opener.current(abort.signal)) {
            setLiveness("live");
            backoff = 500;
            pending.push(...items);
            if (!timer) timer = window.setTimeout(flush, FLUSH_MS);
          }
        } catch {
          // reopened below; the view shows "reconnecting" meanwhile
        }
        if (abort.signal.aborted) break;
        setLiveness("reconnecting");
        await sleep(backoff, abort.signal);
        backoff = Math.min(backoff * 2, MAX_BACKOFF_MS);
      }
    })();
    return () => {
      abort.abort();
      window.clearTimeout(timer);
    };
  }, [key]);
  return liveness;
}

/** Runs of `parent` (that match `filter`, as in ListRuns) as they change. A reopened stream resumes after the
 * last message it had (its resume token), so a reconnect misses nothing; if that resume is refused, the next
 * try starts afresh. Given `onCounts` (and `parent` "jobs/-"), the stream also brings the mesh's counts of
 * runs, first at once and then whenever they change. */
export function useWatchRuns(
  parent: string,
  onBatch: (runs: Run[]) => void,
  initialPageSize = 200,
  filter = "",
  onCounts?: (counts: RunCounts) => void,
): Liveness {
  const resume = useRef("");
  const countsHandler = useRef(onCounts);
  countsHandler.current = onCounts;
  const includeRunCounts = onCounts !== undefined;
  useEffect(() => {
    resume.current = ""; // another parent starts with its first page (declared before the stream's effect)
  }, [parent, filter]);
  const open = useCallback(
    async function* (signal: AbortSignal) {
      const resumeToken = resume.current;
      let answered = false;
      try {
        const request = { parent, filter, initialPageSize, resumeToken, includeRunCounts };
        for await (const response of searchService.watchRuns(request, { signal })) {
          answered = true;
          resume.current = response.resumeToken;
          if (response.runCounts) countsHandler.current?.(response.runCounts);
          yield response.runs;
        }
      } catch (error) {
        if (!answered) resume.current = "";
        throw error;
      }
    },
    [parent, initialPageSize, filter, includeRunCounts],
  );
  return useBatchedStream(open, onBatch, `${parent}|${initialPageSize}|${filter}|${includeRunCounts}`);
}

/** A run's log from the start, then following new lines; a reopened tail resumes after the last line. */
export function useLogTail(name: string, onBatch: (lines: LogLine[]) => void): Liveness {
  const last = useRef(0n);
  useEffect(() => {
    last.current = 0n;
  }, [name]);
  const open = useCallback(
    async function* (signal: AbortSignal) {
      const request = { name, follow: true, afterSequence: last.current };
      for await (const response of searchService.tailRunLogs(request, { signal })) {
        const tail = response.lines.at(-1);
        if (tail) last.current = tail.sequence;
        yield response.lines;
      }
      await new Promise<void>((resolve) => signal.addEventListener("abort", () => resolve()));
    },
    [name],
  );
  return useBatchedStream(open, onBatch, name);
}

export type Loaded<T> = { value?: T; problem?: Problem; loading: boolean; reload: () => void };

/** Calls `load` now and whenever `deps` change or `reload` is called. */
export function useLoad<T>(load: () => Promise<T>, deps: readonly unknown[]): Loaded<T> {
  const [state, setState] = useState<{ value?: T; problem?: Problem; loading: boolean }>({ loading: true });
  const [round, setRound] = useState(0);
  useEffect(() => {
    let current = true;
    setState((before) => ({ ...before, loading: true }));
    load().then(
      (value) => current && setState({ value, loading: false }),
      (error: unknown) => current && setState({ problem: problemOf(error), loading: false }),
    );
    return () => {
      current = false;
    };
  }, [...deps, round]); // `load` is a new closure each render: `deps` say when it asks for something else
  return { ...state, reload: () => setRound((n) => n + 1) };
}
