package dev.jobmesh.example;

import com.google.protobuf.Any;
import com.google.protobuf.InvalidProtocolBufferException;
import com.google.rpc.BadRequest;
import dev.jobmesh.v1.CreateJobRequest;
import dev.jobmesh.v1.CreateJobResponse;
import dev.jobmesh.v1.Job;
import dev.jobmesh.v1.JobServiceGrpc;
import dev.jobmesh.v1.JobServiceGrpc.JobServiceBlockingStub;
import dev.jobmesh.v1.LogLine;
import dev.jobmesh.v1.Run;
import dev.jobmesh.v1.RunState;
import dev.jobmesh.v1.Schedule;
import dev.jobmesh.v1.SearchServiceGrpc;
import dev.jobmesh.v1.SearchServiceGrpc.SearchServiceBlockingStub;
import dev.jobmesh.v1.TailRunLogsRequest;
import dev.jobmesh.v1.Target;
import dev.jobmesh.v1.WatchRunsRequest;
import dev.jobmesh.v1.WatchRunsResponse;
import io.grpc.ClientInterceptor;
import io.grpc.ManagedChannel;
import io.grpc.ManagedChannelBuilder;
import io.grpc.Metadata;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.protobuf.StatusProto;
import io.grpc.stub.MetadataUtils;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.Set;
import java.util.concurrent.TimeUnit;

/**
 * Creates a job on a jobmesh server, waits for its run to succeed, prints the run's log, and shows how an
 * invalid request is refused: a {@code google.rpc.BadRequest} whose field violations name the fields.
 *
 * <p>The address is the first argument, else {@code $JOBMESH_SERVER}, else 127.0.0.1:50051 ({@code jobmesh
 * dev}); {@code $JOBMESH_TOKEN}, when set, is sent as a bearer token.
 */
public final class Example {
  private static final String MESSAGE = "hello from Java";
  private static final Set<RunState> TERMINAL =
      Set.of(
          RunState.RUN_STATE_SUCCEEDED,
          RunState.RUN_STATE_FAILED,
          RunState.RUN_STATE_CANCELLED,
          RunState.RUN_STATE_TIMED_OUT,
          RunState.RUN_STATE_DEAD_LETTERED);

  private Example() {}

  public static void main(String[] args) throws Exception {
    ManagedChannel channel = ManagedChannelBuilder.forTarget(serverAddress(args)).usePlaintext().build();
    try {
      run(channel);
    } catch (IllegalStateException | StatusRuntimeException e) {
      System.err.println("error: " + e.getMessage());
      System.exit(1);
    } finally {
      channel.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
    }
  }

  private static void run(ManagedChannel channel) throws InvalidProtocolBufferException {
    ClientInterceptor token = bearerToken();
    JobServiceBlockingStub jobs = JobServiceGrpc.newBlockingStub(channel).withInterceptors(token);
    SearchServiceBlockingStub search = SearchServiceGrpc.newBlockingStub(channel).withInterceptors(token);

    CreateJobResponse created =
        jobs.withDeadlineAfter(1, TimeUnit.MINUTES)
            .createJob(CreateJobRequest.newBuilder().setJob(echoJob(MESSAGE)).build());
    String runName = created.getRun().getName();
    System.out.printf("created %s, run %s%n", created.getJob().getName(), runName);
    Run finished = waitForRun(search, created.getJob().getName(), runName);
    System.out.printf("run %s %s%n", runName, finished.getState().name().substring("RUN_STATE_".length()));
    if (finished.getState() != RunState.RUN_STATE_SUCCEEDED) {
      throw new IllegalStateException("the run did not succeed");
    }
    printLog(search, runName);
    showInvalidCreate(jobs);
  }

  private static String serverAddress(String[] args) {
    if (args.length > 0) {
      return args[0];
    }
    String fromEnvironment = System.getenv("JOBMESH_SERVER");
    return fromEnvironment == null || fromEnvironment.isEmpty() ? "127.0.0.1:50051" : fromEnvironment;
  }

  /** Sends {@code authorization: Bearer $JOBMESH_TOKEN} with every call, when the variable is set. */
  private static ClientInterceptor bearerToken() {
    Metadata headers = new Metadata();
    String token = System.getenv("JOBMESH_TOKEN");
    if (token != null && !token.isEmpty()) {
      headers.put(Metadata.Key.of("authorization", Metadata.ASCII_STRING_MARSHALLER), "Bearer " + token);
    }
    return MetadataUtils.newAttachHeadersInterceptor(headers);
  }

  private static Job echoJob(String text) {
    return Job.newBuilder()
        .setDisplayName("Java example")
        .setSchedule(Schedule.newBuilder().setImmediate(Schedule.Immediate.getDefaultInstance()))
        .setTarget(Target.newBuilder().setCommand(Target.Command.newBuilder().addArgv("echo").addArgv(text)))
        .build();
  }

  /** Follows the job's runs until the named one ends, and returns it then. */
  private static Run waitForRun(SearchServiceBlockingStub search, String job, String name) {
    Iterator<WatchRunsResponse> changes =
        search
            .withDeadlineAfter(1, TimeUnit.MINUTES)
            .watchRuns(WatchRunsRequest.newBuilder().setParent(job).build());
    while (changes.hasNext()) {
      for (Run run : changes.next().getRunsList()) {
        if (run.getName().equals(name) && TERMINAL.contains(run.getState())) {
          return run;
        }
      }
    }
    throw new IllegalStateException("the watch ended before the run did");
  }

  private static void printLog(SearchServiceBlockingStub search, String run) {
    search
        .withDeadlineAfter(1, TimeUnit.MINUTES)
        .tailRunLogs(TailRunLogsRequest.newBuilder().setName(run).build())
        .forEachRemaining(
            batch -> {
              for (LogLine line : batch.getLinesList()) {
                System.out.println("log: " + line.getText());
              }
            });
  }

  /** Sends a job without a target and prints the field violations the server answers with. */
  private static void showInvalidCreate(JobServiceBlockingStub jobs) throws InvalidProtocolBufferException {
    Job invalid = echoJob(MESSAGE).toBuilder().clearTarget().build();
    try {
      jobs.withDeadlineAfter(1, TimeUnit.MINUTES)
          .createJob(CreateJobRequest.newBuilder().setJob(invalid).build());
      throw new IllegalStateException("an invalid create was accepted");
    } catch (StatusRuntimeException refused) {
      if (refused.getStatus().getCode() != Status.Code.INVALID_ARGUMENT) {
        throw refused;
      }
      System.out.println("invalid create refused: " + refused.getStatus().getCode());
      printViolations(StatusProto.fromThrowable(refused));
    }
  }

  private static void printViolations(com.google.rpc.Status status) throws InvalidProtocolBufferException {
    List<BadRequest.FieldViolation> violations = new ArrayList<>();
    List<Any> details = status == null ? List.of() : status.getDetailsList();
    for (Any detail : details) {
      if (detail.is(BadRequest.class)) {
        violations.addAll(detail.unpack(BadRequest.class).getFieldViolationsList());
      }
    }
    if (violations.isEmpty()) {
      throw new IllegalStateException("the refusal carried no BadRequest field violations");
    }
    for (BadRequest.FieldViolation violation : violations) {
      System.out.printf("violation %s: %s%n", violation.getField(), violation.getDescription());
    }
  }
}
