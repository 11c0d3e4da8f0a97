// Creates a job on a jobmesh server, waits for its run to succeed, prints the run's log, and shows how an
// invalid request is refused: a google.rpc.BadRequest whose field violations name the fields.
//
//   node dist/main.js [ADDRESS]
//
// ADDRESS (else $JOBMESH_SERVER, else 127.0.0.1:50051, `jobmesh dev`) is HOST:PORT for gRPC over HTTP/2,
// or an http(s):// URL for gRPC-Web, such as the dashboard's Envoy (http://127.0.0.1:8080). $JOBMESH_TOKEN,
// when set, is sent as a bearer token.
import { Code, ConnectError, createClient, type Interceptor, type Transport } from "@connectrpc/connect";
import { createGrpcTransport, createGrpcWebTransport } from "@connectrpc/connect-node";
import { create } from "@bufbuild/protobuf";
import { BadRequestSchema } from "@jobmesh/api/google/rpc/error_details_pb.js";
import { type Job, JobSchema } from "@jobmesh/api/jobmesh/v1/job_pb.js";
import { JobService } from "@jobmesh/api/jobmesh/v1/job_service_pb.js";
import { type Run, RunState } from "@jobmesh/api/jobmesh/v1/run_pb.js";
import { SearchService } from "@jobmesh/api/jobmesh/v1/search_service_pb.js";

const MESSAGE = "hello from TypeScript";
const TIMEOUT_MS = 60_000;
const TERMINAL = new Set([
  RunState.SUCCEEDED,
  RunState.FAILED,
  RunState.CANCELLED,
  RunState.TIMED_OUT,
  RunState.DEAD_LETTERED,
]);

function transportTo(address: string): Transport {
  const interceptors = [bearerToken(process.env.JOBMESH_TOKEN)];
  if (/^https?:\/\//.test(address)) {
    return createGrpcWebTransport({ baseUrl: address, httpVersion: "1.1", interceptors });
  }
  return createGrpcTransport({ baseUrl: `http://${address}`, interceptors });
}

/** Sends `authorization: Bearer TOKEN` with every call, when there is a token. */
function bearerToken(token: string | undefined): Interceptor {
  return (next) => async (request) => {
    if (token) {
      request.header.set("authorization", `Bearer ${token}`);
    }
    return next(request);
  };
}

function echoJob(text: string): Job {
  return create(JobSchema, {
    displayName: "TypeScript example",
    schedule: { kind: { case: "immediate", value: {} } },
    target: { kind: { case: "command", value: { argv: ["echo", text] } } },
  });
}

async function main(address: string): Promise<void> {
  const transport = transportTo(address);
  const jobs = createClient(JobService, transport);
  const search = createClient(SearchService, transport);

  const created = await jobs.createJob({ job: echoJob(MESSAGE) }, { timeoutMs: TIMEOUT_MS });
  const job = created.job?.name ?? "";
  const runName = created.run?.name ?? "";
  console.log(`created ${job}, run ${runName}`);
  const finished = await waitForRun(search, job, runName);
  console.log(`run ${runName} ${RunState[finished.state]}`);
  if (finished.state !== RunState.SUCCEEDED) {
    throw new Error("the run did not succeed");
  }
  for await (const batch of search.tailRunLogs({ name: runName }, { timeoutMs: TIMEOUT_MS })) {
    for (const line of batch.lines) {
      console.log(`log: ${line.text}`);
    }
  }
  await showInvalidCreate(jobs);
}

/** Follows the job's runs until the named one ends, and returns it then. */
async function waitForRun(
  search: ReturnType<typeof createClient<typeof SearchService>>,
  job: string,
  name: string,
): Promise<Run> {
  for await (const changes of search.watchRuns({ parent: job }, { timeoutMs: TIMEOUT_MS })) {
    const run = changes.runs.find((r) => r.name === name && TERMINAL.has(r.state));
    if (run) {
      return run; // leaving the loop cancels the stream
    }
  }
  throw new Error("the watch ended before the run did");
}

/** Sends a job without a target and prints the field violations the server answers with. */
async function showInvalidCreate(jobs: ReturnType<typeof createClient<typeof JobService>>): Promise<void> {
  const invalid = echoJob(MESSAGE);
  invalid.target = undefined;
  try {
    await jobs.createJob({ job: invalid }, { timeoutMs: TIMEOUT_MS });
  } catch (caught) {
    const refused = ConnectError.from(caught);
    if (refused.code !== Code.InvalidArgument) {
      throw refused;
    }
    console.log(`invalid create refused: ${Code[refused.code]}`);
    const violations = refused.findDetails(BadRequestSchema).flatMap((detail) => detail.fieldViolations);
    if (violations.length === 0) {
      throw new Error("the refusal carried no BadRequest field violations");
    }
    for (const violation of violations) {
      console.log(`violation ${violation.field}: ${violation.description}`);
    }
    return;
  }
  throw new Error("an invalid create was accepted");
}

main(process.argv[2] ?? process.env.JOBMESH_SERVER ?? "127.0.0.1:50051").catch((error: unknown) => {
  console.error(`error: ${error instanceof Error ? error.message : String(error)}`);
  process.exitCode = 1;
});
