// Create a job: immediate, at a time, or cron with a time zone. The server validates; its BadRequest field
// violations are shown next to their inputs, and so is a job id that is taken (ALREADY_EXISTS).
import { useEffect, useState } from "react";
import { jobService } from "../api";
import { ProblemBanner } from "../components";
import { jobIdTaken, problemOf, unclaimed, type Problem } from "../errors";
import { JobForm } from "../JobForm";
import { EMPTY_FORM, FIELDS, jobOf, type FormValues } from "../jobform";
import { linkTo, navigate } from "../router";

export const CLAIMED = Object.values(FIELDS).flat();

export function Leftovers({ problem }: { problem?: Problem }) {
  if (!problem) return null;
  const rest = unclaimed(problem.fields, CLAIMED);
  return (
    <ProblemBanner problem={problem}>
      <p>{problem.message}</p>
      {rest.length ? (
        <ul>
          {rest.map((line) => (
            <li key={line}>{line}</li>
          ))}
        </ul>
      ) : null}
    </ProblemBanner>
  );
}

export function CreateJob() {
  const [values, setValues] = useState<FormValues>(EMPTY_FORM);
  const [problem, setProblem] = useState<Problem>();
  const [taken, setTaken] = useState<string>(); // the job id is taken: said at its field, not in a banner
  const [busy, setBusy] = useState(false);
  useEffect(() => {
    if (taken) document.querySelector<HTMLInputElement>('input[name="jobId"]')?.focus(); // scrolls it into view
  }, [taken]);
  const submit = async () => {
    setBusy(true);
    setProblem(undefined);
    setTaken(undefined);
    const jobId = values.jobId.trim();
    try {
      const response = await jobService.createJob({ job: jobOf(values), jobId });
      navigate(linkTo(response.job?.name ?? "jobs"));
    } catch (error) {
      const found = problemOf(error);
      const takenText = jobIdTaken(found, jobId);
      setTaken(takenText);
      setProblem(takenText ? undefined : found);
    } finally {
      setBusy(false);
    }
  };
  const fields = taken ? { [FIELDS.jobId[0]]: taken } : (problem?.fields ?? {});
  return (
    <section aria-labelledby="create-title">
      <header className="view-head">
        <h1 id="create-title">New job</h1>
      </header>
      <JobForm mode="create" values={values} onChange={setValues} fields={fields} submitLabel="Create job" busy={busy} onSubmit={() => void submit()}>
        <Leftovers problem={problem} />
      </JobForm>
    </section>
  );
}
