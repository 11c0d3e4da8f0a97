// The job form: create (every field) or edit (labels, schedule, retry policy). Each input shows the API's
// field violations for its path; the schedule shows its words and next fire times as it is typed.
import { useEffect, useId, useState, type ReactNode } from "react";
import { searchService } from "./api";
import { Choices, FieldError } from "./components";
import { violationFor } from "./errors";
import { FIELDS, FormProblems, jobOf, runAtHasPassed, type FormValues, type ScheduleChoice, type TargetChoice } from "./jobform";
import { describeCron } from "./schedule";
import { formatTime } from "./time";
import type { Timestamp } from "@bufbuild/protobuf/wkt";

const ZONES: readonly string[] = (() => {
  try {
    return Intl.supportedValuesOf("timeZone");
  } catch {
    return ["UTC"];
  }
})();

const SCHEDULES: readonly (readonly [ScheduleChoice, string])[] = [
  ["immediate", "Now, once"],
  ["runAt", "At a time, once"],
  ["cron", "On a cron schedule"],
];
const TARGETS: readonly (readonly [TargetChoice, string])[] = [
  ["command", "A command"],
  ["http", "A webhook"],
  ["handler", "A handler"],
];

type Props = {
  mode: "create" | "edit";
  values: FormValues;
  onChange: (values: FormValues) => void;
  fields: Record<string, string>; // violations by field path
  submitLabel: string;
  busy: boolean;
  onSubmit: () => void;
  children?: ReactNode; // shown above the buttons (a conflict, an error)
};

function Field(props: {
  label: string;
  name: keyof typeof FIELDS;
  fields: Record<string, string>;
  hint?: string;
  children: (attributes: { id: string; "aria-describedby"?: string; "aria-invalid"?: boolean; name: string }) => ReactNode;
}) {
  const id = useId();
  const error = violationFor(props.fields, FIELDS[props.name]);
  return (
    <div className={`field${error ? " invalid" : ""}`} data-field={FIELDS[props.name][0]}>
      <label htmlFor={id}>{props.label}</label>
      {props.children({ id, name: props.name, "aria-describedby": error ? `${id}-error` : undefined, "aria-invalid": error ? true : undefined })}
      {props.hint ? <p className="hint">{props.hint}</p> : null}
      <FieldError id={`${id}-error`} text={error} />
    </div>
  );
}

function SchedulePreview({ cron, timeZone }: { cron: string; timeZone: string }) {
  const [times, setTimes] = useState<Timestamp[] | undefined>();
  const [zone, setZone] = useState("UTC");
  useEffect(() => {
    const timer = window.setTimeout(() => {
      searchService
        .previewSchedule({ schedule: { kind: { case: "cron", value: { expression: cron, timeZone } } }, count: 5 })
        .then(
          (response) => {
            setTimes(response.fireTimes);
            setZone(response.timeZone);
          },
          () => setTimes(undefined),
        );
    }, 300);
    return () => window.clearTimeout(timer);
  }, [cron, timeZone]);
  return (
    <div className="preview" aria-live="polite">
      <p>{describeCron(cron)}</p>
      {times ? (
        <ol className="fire-times">
          {times.map((time) => (
            <li key={String(time.seconds)}>{formatTime(time, zone)}</li>
          ))}
        </ol>
      ) : null}
    </div>
  );
}

export function JobForm(props: Props) {
  const { values, fields } = props;
  const [local, setLocal] = useState<Record<string, string>>({});
  const shown = { ...fields, ...local };
  const set = (change: Partial<FormValues>) => props.onChange({ ...values, ...change });
  const submit = (event: React.FormEvent) => {
    event.preventDefault();
    try {
      jobOf(values);
      setLocal({});
      props.onSubmit();
    } catch (error) {
      if (error instanceof FormProblems) setLocal(error.fields);
      else throw error;
    }
  };
  const create = props.mode === "create";
  return (
    <form className="jobform" onSubmit={submit} noValidate>
      {create ? (
        <fieldset>
          <legend>Job</legend>
          <Field label="Job id" name="jobId" fields={shown} hint="a-z, 0-9 and -, starting with a letter; empty: the server picks one">
            {(a) => <input {...a} value={values.jobId} onChange={(e) => set({ jobId: e.target.value })} autoComplete="off" />}
          </Field>
          <Field label="Display name" name="displayName" fields={shown}>
            {(a) => <input {...a} value={values.displayName} onChange={(e) => set({ displayName: e.target.value })} />}
          </Field>
        </fieldset>
      ) : null}
      <fieldset>
        <legend>Labels</legend>
        <Field label="Labels, one key=value a line" name="labels" fields={shown}>
          {(a) => <textarea {...a} rows={3} value={values.labels} onChange={(e) => set({ labels: e.target.value })} />}
        </Field>
      </fieldset>
      <fieldset>
        <legend>Schedule</legend>
        <Choices name="schedule" label="When it runs" value={values.schedule} options={SCHEDULES} onChange={(schedule) => set({ schedule })} />
        {values.schedule === "runAt" ? (
          <Field label="Run at (your browser's time zone)" name="runAt" fields={shown}>
            {(a) => <input {...a} type="datetime-local" value={values.runAt} onChange={(e) => set({ runAt: e.target.value })} />}
          </Field>
        ) : null}
        {runAtHasPassed(values, Date.now()) ? (
          <p className="warning" role="alert" data-warning="run-at-passed">
            This time has already passed: the run will start at once, and be marked as made after its time.
          </p>
        ) : null}
        {values.schedule === "cron" ? (
          <>
            <Field label="Cron expression" name="cron" fields={shown} hint="5 fields, 6 with leading seconds, or @hourly, @daily…">
              {(a) => <input {...a} className="mono" value={values.cron} onChange={(e) => set({ cron: e.target.value })} autoComplete="off" />}
            </Field>
            <Field label="Time zone" name="timeZone" fields={shown}>
              {(a) => (
                <>
                  <input {...a} list={`${a.id}-zones`} value={values.timeZone} onChange={(e) => set({ timeZone: e.target.value })} autoComplete="off" />
                  <datalist id={`${a.id}-zones`}>
                    {ZONES.map((zone) => (
                      <option key={zone} value={zone} />
                    ))}
                  </datalist>
                </>
              )}
            </Field>
            <SchedulePreview cron={values.cron} timeZone={values.timeZone} />
          </>
        ) : null}
      </fieldset>
      {create ? (
        <fieldset>
          <legend>Target</legend>
          <Choices name="target" label="What it runs" value={values.target} options={TARGETS} onChange={(target) => set({ target })} />
          {values.target === "command" ? (
            <Field label="Command line" name="command" fields={shown} hint="split as a shell would (quotes work); nothing is expanded">
              {(a) => <input {...a} className="mono" value={values.command} onChange={(e) => set({ command: e.target.value })} placeholder="sh -c 'echo hello'" autoComplete="off" />}
            </Field>
          ) : null}
          {values.target === "http" ? (
            <>
              <Field label="URL" name="url" fields={shown}>
                {(a) => <input {...a} value={values.url} onChange={(e) => set({ url: e.target.value })} placeholder="https://example.com/hook" />}
              </Field>
              <Field label="Method" name="method" fields={shown}>
                {(a) => (
                  <select {...a} value={values.method} onChange={(e) => set({ method: e.target.value })}>
                    {["POST", "GET", "PUT", "PATCH", "DELETE"].map((method) => (
                      <option key={method}>{method}</option>
                    ))}
                  </select>
                )}
              </Field>
            </>
          ) : null}
          {values.target === "handler" ? (
            <Field label="Handler name" name="handler" fields={shown}>
              {(a) => <input {...a} value={values.handler} onChange={(e) => set({ handler: e.target.value })} />}
            </Field>
          ) : null}
        </fieldset>
      ) : null}
      <fieldset>
        <legend>Retries</legend>
        <div className="row">
          <Field label="Attempts in all" name="maxAttempts" fields={shown} hint="empty or 1: no retry">
            {(a) => <input {...a} inputMode="numeric" value={values.maxAttempts} onChange={(e) => set({ maxAttempts: e.target.value })} />}
          </Field>
          <Field label="First backoff (s)" name="initialBackoff" fields={shown} hint="default 1 s, doubling">
            {(a) => <input {...a} inputMode="decimal" value={values.initialBackoff} onChange={(e) => set({ initialBackoff: e.target.value })} />}
          </Field>
          {create ? (
            <Field label="Timeout (s)" name="executionTimeout" fields={shown} hint="empty: none">
              {(a) => <input {...a} inputMode="decimal" value={values.executionTimeout} onChange={(e) => set({ executionTimeout: e.target.value })} />}
            </Field>
          ) : null}
        </div>
      </fieldset>
      {create ? (
        <fieldset>
          <legend>Routing</legend>
          <div className="row">
            <Field label="Queue" name="queue" fields={shown} hint="empty: default">
              {(a) => <input {...a} value={values.queue} onChange={(e) => set({ queue: e.target.value })} />}
            </Field>
            <Field label="Priority" name="priority" fields={shown}>
              {(a) => (
                <select {...a} value={values.priority} onChange={(e) => set({ priority: e.target.value })}>
                  <option value="">normal</option>
                  <option value="HIGH">high</option>
                  <option value="LOW">low</option>
                </select>
              )}
            </Field>
          </div>
        </fieldset>
      ) : null}
      {props.children}
      <div className="actions">
        <button type="submit" className="primary" disabled={props.busy}>
          {props.busy ? "Saving…" : props.submitLabel}
        </button>
      </div>
    </form>
  );
}
