// Edit a job's labels, schedule and retry policy, with the etag it was read at: a stale edit is refused by
// the server (ABORTED) and shown as a conflict, never applied over someone else's change.
import { useEffect, useState } from "react";
import { jobService } from "../api";
import { ProblemBanner } from "../components";
import { conflictMessage, problemOf, type Problem } from "../errors";
import { useLoad } from "../hooks";
import { JobForm } from "../JobForm";
import { jobOf, valuesOf, type FormValues } from "../jobform";
import { linkTo, navigate } from "../router";
import { Leftovers } from "./CreateJob";

export function EditJob({ name }: { name: string }) {
  const loaded = useLoad(() => jobService.getJob({ name }), [name]);
  const job = loaded.value?.job;
  const [values, setValues] = useState<FormValues>();
  const [problem, setProblem] = useState<Problem>();
  const [busy, setBusy] = useState(false);
  useEffect(() => {
    if (job) {
      setValues(valuesOf(job));
      setProblem(undefined);
    }
  }, [job]);
  if (loaded.problem) return <ProblemBanner problem={loaded.problem} />;
  if (!job || !values) return <p>Loading…</p>;
  const submit = async () => {
    setBusy(true);
    setProblem(undefined);
    try {
      const edited = jobOf(values);
      edited.name = job.name;
      edited.etag = job.etag;
      await jobService.updateJob({ job: edited, updateMask: { paths: ["labels", "schedule", "retry_policy"] } });
      navigate(linkTo(job.name));
    } catch (error) {
      setProblem(problemOf(error));
    } finally {
      setBusy(false);
    }
  };
  const conflict = problem && conflictMessage(problem, job.etag);
  return (
    <section aria-labelledby="edit-title">
      <header className="view-head">
        <h1 id="edit-title">Edit {job.name.replace("jobs/", "")}</h1>
        <span className="hint">version {job.etag}</span>
      </header>
      <JobForm mode="edit" values={values} onChange={setValues} fields={problem?.fields ?? {}} submitLabel="Save changes" busy={busy} onSubmit={() => void submit()}>
        {conflict ? (
          <div className="conflict" role="alert">
            <p>{conflict}</p>
            <button type="button" onClick={loaded.reload}>
              Reload the job
            </button>
          </div>
        ) : (
          <Leftovers problem={problem} />
        )}
      </JobForm>
    </section>
  );
}
