// What an API error means for a person: its message, the BadRequest field violations by field path, and the
// ErrorInfo reason (for example ETAG_MISMATCH) with its metadata.
import { Code, ConnectError } from "@connectrpc/connect";
import { BadRequestSchema, ErrorInfoSchema } from "@gen/google/rpc/error_details_pb.js";

export type Problem = {
  code: Code;
  message: string;
  fields: Record<string, string>;
  reason: string;
  metadata: Record<string, string>;
};

export function problemOf(error: unknown): Problem {
  const failure = ConnectError.from(error);
  const fields: Record<string, string> = {};
  for (const detail of failure.findDetails(BadRequestSchema)) {
    for (const violation of detail.fieldViolations) {
      const before = fields[violation.field];
      fields[violation.field] = before ? `${before}; ${violation.description}` : violation.description;
    }
  }
  const [info] = failure.findDetails(ErrorInfoSchema);
  return {
    code: failure.code,
    message: failure.rawMessage,
    fields,
    reason: info?.reason ?? "",
    metadata: info ? { ...info.metadata } : {},
  };
}

/** The violations of the fields at or under one of `prefixes`, as one text; "" when there is none. */
export function violationFor(fields: Record<string, string>, prefixes: readonly string[]): string {
  return Object.entries(fields)
    .filter(([field]) => prefixes.some((p) => field === p || field.startsWith(`${p}.`) || field.startsWith(`${p}[`)))
    .map(([, text]) => text)
    .join("; ");
}

/** The violations no form field claims, with their paths. */
export function unclaimed(fields: Record<string, string>, claimed: readonly string[]): string[] {
  return Object.entries(fields)
    .filter(([field]) => violationFor({ [field]: "x" }, claimed) === "")
    .map(([field, text]) => `${field}: ${text}`);
}

/** The sentence shown for a stale edit (ABORTED, ETAG_MISMATCH); undefined for any other error. */
export function conflictMessage(problem: Problem, sentEtag: string): string | undefined {
  if (problem.code !== Code.Aborted || problem.reason !== "ETAG_MISMATCH") return undefined;
  const current = problem.metadata["current_etag"];
  const versions = current ? ` (you edited version ${sentEtag}; it is now at version ${current})` : "";
  return (
    `Someone else changed this job after you opened it${versions}. Your changes were not saved: ` +
    "reload the job to see what changed, then make your edit again."
  );
}

/** What to show at the job-id field when the id the form sent is taken (ALREADY_EXISTS); undefined for any
 * other problem, a reused request id included. It belongs at the field the person can change, not in a banner
 * below the form. */
export function jobIdTaken(problem: Problem, jobId: string): string | undefined {
  if (problem.code !== Code.AlreadyExists || problem.reason !== "ALREADY_EXISTS" || !jobId) return undefined;
  return `A job with the id "${jobId}" already exists: choose another id, or leave it empty for the server to pick one.`;
}
