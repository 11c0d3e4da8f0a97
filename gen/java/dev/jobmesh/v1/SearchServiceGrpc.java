package dev.jobmesh.v1;

import static io.grpc.MethodDescriptor.generateFullMethodName;

/**
 * <pre>
 * Reads: lists, lookups and live streams of jobs and runs.
 * Filters are a subset of AIP-160: comparisons joined by `AND` (`OR` inside parentheses is not supported).
 * Operators `=`, `!=`, `&lt;`, `&lt;=`, `&gt;`, `&gt;=` and `:` (has). Values are quoted strings, numbers, enum names, or
 * RFC 3339 timestamps in quotes. An unknown field or operator is `INVALID_ARGUMENT`. For jobs' `display_name`
 * and `name`, `*` in an `=` or `!=` value matches any characters, ignoring case (`display_name = "*report*"`).
 * Every resource is in a namespace, and every list and stream is scoped to the namespaces where the caller holds
 * the viewer role: a filter naming another namespace finds nothing. `namespace` filters further.
 * Jobs: `namespace`, `state` (`ACTIVE`, `PAUSED`, `COMPLETED`, `DELETED`), `schedule` (`IMMEDIATE`, `RUN_AT`, `CRON`),
 * `priority`, `queue`, `display_name`, `labels.KEY`, `labels:KEY`, `create_time`, `update_time`,
 * `next_run_time`.
 * Runs: `namespace`, `state` (a `RunState` name without its prefix; also `DEAD_LETTERED`), `job` (`jobs/{job}`), `attempt`,
 * `trigger`, `executor`, `labels.KEY` (the job's labels), `schedule_time`, `due_time`, `start_time`,
 * `end_time`, `create_time`, `update_time`.
 * Audit events: `namespace`, `actor`, `action` (an `AuditAction` name without its prefix), `resource` (a job or
 * run name), `job` (`jobs/{job}`: the job and its runs), `request_id`, `time`.
 * </pre>
 */
@io.grpc.stub.annotations.GrpcGenerated
public final class SearchServiceGrpc {

  private SearchServiceGrpc() {}

  public static final java.lang.String SERVICE_NAME = "jobmesh.v1.SearchService";

  // Static method descriptors that strictly reflect the proto.
  private static volatile io.grpc.MethodDescriptor<dev.jobmesh.v1.ListJobsRequest,
      dev.jobmesh.v1.ListJobsResponse> getListJobsMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "ListJobs",
      requestType = dev.jobmesh.v1.ListJobsRequest.class,
      responseType = dev.jobmesh.v1.ListJobsResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<dev.jobmesh.v1.ListJobsRequest,
      dev.jobmesh.v1.ListJobsResponse> getListJobsMethod() {
    io.grpc.MethodDescriptor<dev.jobmesh.v1.ListJobsRequest, dev.jobmesh.v1.ListJobsResponse> getListJobsMethod;
    if ((getListJobsMethod = SearchServiceGrpc.getListJobsMethod) == null) {
      synchronized (SearchServiceGrpc.class) {
        if ((getListJobsMethod = SearchServiceGrpc.getListJobsMethod) == null) {
          SearchServiceGrpc.getListJobsMethod = getListJobsMethod =
              io.grpc.MethodDescriptor.<dev.jobmesh.v1.ListJobsRequest, dev.jobmesh.v1.ListJobsResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "ListJobs"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.jobmesh.v1.ListJobsRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.jobmesh.v1.ListJobsResponse.getDefaultInstance()))
              .setSchemaDescriptor(new SearchServiceMethodDescriptorSupplier("ListJobs"))
              .build();
        }
      }
    }
    return getListJobsMethod;
  }

  private static volatile io.grpc.MethodDescriptor<dev.jobmesh.v1.ListRunsRequest,
      dev.jobmesh.v1.ListRunsResponse> getListRunsMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "ListRuns",
      requestType = dev.jobmesh.v1.ListRunsRequest.class,
      responseType = dev.jobmesh.v1.ListRunsResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<dev.jobmesh.v1.ListRunsRequest,
      dev.jobmesh.v1.ListRunsResponse> getListRunsMethod() {
    io.grpc.MethodDescriptor<dev.jobmesh.v1.ListRunsRequest, dev.jobmesh.v1.ListRunsResponse> getListRunsMethod;
    if ((getListRunsMethod = SearchServiceGrpc.getListRunsMethod) == null) {
      synchronized (SearchServiceGrpc.class) {
        if ((getListRunsMethod = SearchServiceGrpc.getListRunsMethod) == null) {
          SearchServiceGrpc.getListRunsMethod = getListRunsMethod =
              io.grpc.MethodDescriptor.<dev.jobmesh.v1.ListRunsRequest, dev.jobmesh.v1.ListRunsResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "ListRuns"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.jobmesh.v1.ListRunsRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.jobmesh.v1.ListRunsResponse.getDefaultInstance()))
              .setSchemaDescriptor(new SearchServiceMethodDescriptorSupplier("ListRuns"))
              .build();
        }
      }
    }
    return getListRunsMethod;
  }

  private static volatile io.grpc.MethodDescriptor<dev.jobmesh.v1.GetRunRequest,
      dev.jobmesh.v1.GetRunResponse> getGetRunMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "GetRun",
      requestType = dev.jobmesh.v1.GetRunRequest.class,
      responseType = dev.jobmesh.v1.GetRunResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<dev.jobmesh.v1.GetRunRequest,
      dev.jobmesh.v1.GetRunResponse> getGetRunMethod() {
    io.grpc.MethodDescriptor<dev.jobmesh.v1.GetRunRequest, dev.jobmesh.v1.GetRunResponse> getGetRunMethod;
    if ((getGetRunMethod = SearchServiceGrpc.getGetRunMethod) == null) {
      synchronized (SearchServiceGrpc.class) {
        if ((getGetRunMethod = SearchServiceGrpc.getGetRunMethod) == null) {
          SearchServiceGrpc.getGetRunMethod = getGetRunMethod =
              io.grpc.MethodDescriptor.<dev.jobmesh.v1.GetRunRequest, dev.jobmesh.v1.GetRunResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "GetRun"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.jobmesh.v1.GetRunRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.jobmesh.v1.GetRunResponse.getDefaultInstance()))
              .setSchemaDescriptor(new SearchServiceMethodDescriptorSupplier("GetRun"))
              .build();
        }
      }
    }
    return getGetRunMethod;
  }

  private static volatile io.grpc.MethodDescriptor<dev.jobmesh.v1.WatchRunsRequest,
      dev.jobmesh.v1.WatchRunsResponse> getWatchRunsMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "WatchRuns",
      requestType = dev.jobmesh.v1.WatchRunsRequest.class,
      responseType = dev.jobmesh.v1.WatchRunsResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.SERVER_STREAMING)
  public static io.grpc.MethodDescriptor<dev.jobmesh.v1.WatchRunsRequest,
      dev.jobmesh.v1.WatchRunsResponse> getWatchRunsMethod() {
    io.grpc.MethodDescriptor<dev.jobmesh.v1.WatchRunsRequest, dev.jobmesh.v1.WatchRunsResponse> getWatchRunsMethod;
    if ((getWatchRunsMethod = SearchServiceGrpc.getWatchRunsMethod) == null) {
      synchronized (SearchServiceGrpc.class) {
        if ((getWatchRunsMethod = SearchServiceGrpc.getWatchRunsMethod) == null) {
          SearchServiceGrpc.getWatchRunsMethod = getWatchRunsMethod =
              io.grpc.MethodDescriptor.<dev.jobmesh.v1.WatchRunsRequest, dev.jobmesh.v1.WatchRunsResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.SERVER_STREAMING)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "WatchRuns"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.jobmesh.v1.WatchRunsRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.jobmesh.v1.WatchRunsResponse.getDefaultInstance()))
              .setSchemaDescriptor(new SearchServiceMethodDescriptorSupplier("WatchRuns"))
              .build();
        }
      }
    }
    return getWatchRunsMethod;
  }

  private static volatile io.grpc.MethodDescriptor<dev.jobmesh.v1.CountRunsRequest,
      dev.jobmesh.v1.CountRunsResponse> getCountRunsMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "CountRuns",
      requestType = dev.jobmesh.v1.CountRunsRequest.class,
      responseType = dev.jobmesh.v1.CountRunsResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<dev.jobmesh.v1.CountRunsRequest,
      dev.jobmesh.v1.CountRunsResponse> getCountRunsMethod() {
    io.grpc.MethodDescriptor<dev.jobmesh.v1.CountRunsRequest, dev.jobmesh.v1.CountRunsResponse> getCountRunsMethod;
    if ((getCountRunsMethod = SearchServiceGrpc.getCountRunsMethod) == null) {
      synchronized (SearchServiceGrpc.class) {
        if ((getCountRunsMethod = SearchServiceGrpc.getCountRunsMethod) == null) {
          SearchServiceGrpc.getCountRunsMethod = getCountRunsMethod =
              io.grpc.MethodDescriptor.<dev.jobmesh.v1.CountRunsRequest, dev.jobmesh.v1.CountRunsResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "CountRuns"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.jobmesh.v1.CountRunsRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.jobmesh.v1.CountRunsResponse.getDefaultInstance()))
              .setSchemaDescriptor(new SearchServiceMethodDescriptorSupplier("CountRuns"))
              .build();
        }
      }
    }
    return getCountRunsMethod;
  }

  private static volatile io.grpc.MethodDescriptor<dev.jobmesh.v1.TailRunLogsRequest,
      dev.jobmesh.v1.TailRunLogsResponse> getTailRunLogsMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "TailRunLogs",
      requestType = dev.jobmesh.v1.TailRunLogsRequest.class,
      responseType = dev.jobmesh.v1.TailRunLogsResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.SERVER_STREAMING)
  public static io.grpc.MethodDescriptor<dev.jobmesh.v1.TailRunLogsRequest,
      dev.jobmesh.v1.TailRunLogsResponse> getTailRunLogsMethod() {
    io.grpc.MethodDescriptor<dev.jobmesh.v1.TailRunLogsRequest, dev.jobmesh.v1.TailRunLogsResponse> getTailRunLogsMethod;
    if ((getTailRunLogsMethod = SearchServiceGrpc.getTailRunLogsMethod) == null) {
      synchronized (SearchServiceGrpc.class) {
        if ((getTailRunLogsMethod = SearchServiceGrpc.getTailRunLogsMethod) == null) {
          SearchServiceGrpc.getTailRunLogsMethod = getTailRunLogsMethod =
              io.grpc.MethodDescriptor.<dev.jobmesh.v1.TailRunLogsRequest, dev.jobmesh.v1.TailRunLogsResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.SERVER_STREAMING)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "TailRunLogs"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.jobmesh.v1.TailRunLogsRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.jobmesh.v1.TailRunLogsResponse.getDefaultInstance()))
              .setSchemaDescriptor(new SearchServiceMethodDescriptorSupplier("TailRunLogs"))
              .build();
        }
      }
    }
    return getTailRunLogsMethod;
  }

  private static volatile io.grpc.MethodDescriptor<dev.jobmesh.v1.PreviewScheduleRequest,
      dev.jobmesh.v1.PreviewScheduleResponse> getPreviewScheduleMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "PreviewSchedule",
      requestType = dev.jobmesh.v1.PreviewScheduleRequest.class,
      responseType = dev.jobmesh.v1.PreviewScheduleResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<dev.jobmesh.v1.PreviewScheduleRequest,
      dev.jobmesh.v1.PreviewScheduleResponse> getPreviewScheduleMethod() {
    io.grpc.MethodDescriptor<dev.jobmesh.v1.PreviewScheduleRequest, dev.jobmesh.v1.PreviewScheduleResponse> getPreviewScheduleMethod;
    if ((getPreviewScheduleMethod = SearchServiceGrpc.getPreviewScheduleMethod) == null) {
      synchronized (SearchServiceGrpc.class) {
        if ((getPreviewScheduleMethod = SearchServiceGrpc.getPreviewScheduleMethod) == null) {
          SearchServiceGrpc.getPreviewScheduleMethod = getPreviewScheduleMethod =
              io.grpc.MethodDescriptor.<dev.jobmesh.v1.PreviewScheduleRequest, dev.jobmesh.v1.PreviewScheduleResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "PreviewSchedule"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.jobmesh.v1.PreviewScheduleRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.jobmesh.v1.PreviewScheduleResponse.getDefaultInstance()))
              .setSchemaDescriptor(new SearchServiceMethodDescriptorSupplier("PreviewSchedule"))
              .build();
        }
      }
    }
    return getPreviewScheduleMethod;
  }

  private static volatile io.grpc.MethodDescriptor<dev.jobmesh.v1.ListAuditEventsRequest,
      dev.jobmesh.v1.ListAuditEventsResponse> getListAuditEventsMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "ListAuditEvents",
      requestType = dev.jobmesh.v1.ListAuditEventsRequest.class,
      responseType = dev.jobmesh.v1.ListAuditEventsResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<dev.jobmesh.v1.ListAuditEventsRequest,
      dev.jobmesh.v1.ListAuditEventsResponse> getListAuditEventsMethod() {
    io.grpc.MethodDescriptor<dev.jobmesh.v1.ListAuditEventsRequest, dev.jobmesh.v1.ListAuditEventsResponse> getListAuditEventsMethod;
    if ((getListAuditEventsMethod = SearchServiceGrpc.getListAuditEventsMethod) == null) {
      synchronized (SearchServiceGrpc.class) {
        if ((getListAuditEventsMethod = SearchServiceGrpc.getListAuditEventsMethod) == null) {
          SearchServiceGrpc.getListAuditEventsMethod = getListAuditEventsMethod =
              io.grpc.MethodDescriptor.<dev.jobmesh.v1.ListAuditEventsRequest, dev.jobmesh.v1.ListAuditEventsResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "ListAuditEvents"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.jobmesh.v1.ListAuditEventsRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.jobmesh.v1.ListAuditEventsResponse.getDefaultInstance()))
              .setSchemaDescriptor(new SearchServiceMethodDescriptorSupplier("ListAuditEvents"))
              .build();
        }
      }
    }
    return getListAuditEventsMethod;
  }

  /**
   * Creates a new async stub that supports all call types for the service
   */
  public static SearchServiceStub newStub(io.grpc.Channel channel) {
    io.grpc.stub.AbstractStub.StubFactory<SearchServiceStub> factory =
      new io.grpc.stub.AbstractStub.StubFactory<SearchServiceStub>() {
        @java.lang.Override
        public SearchServiceStub newStub(io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
          return new SearchServiceStub(channel, callOptions);
        }
      };
    return SearchServiceStub.newStub(factory, channel);
  }

  /**
   * Creates a new blocking-style stub that supports all types of calls on the service
   */
  public static SearchServiceBlockingV2Stub newBlockingV2Stub(
      io.grpc.Channel channel) {
    io.grpc.stub.AbstractStub.StubFactory<SearchServiceBlockingV2Stub> factory =
      new io.grpc.stub.AbstractStub.StubFactory<SearchServiceBlockingV2Stub>() {
        @java.lang.Override
        public SearchServiceBlockingV2Stub newStub(io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
          return new SearchServiceBlockingV2Stub(channel, callOptions);
        }
      };
    return SearchServiceBlockingV2Stub.newStub(factory, channel);
  }

  /**
   * Creates a new blocking-style stub that supports unary and streaming output calls on the service
   */
  public static SearchServiceBlockingStub newBlockingStub(
      io.grpc.Channel channel) {
    io.grpc.stub.AbstractStub.StubFactory<SearchServiceBlockingStub> factory =
      new io.grpc.stub.AbstractStub.StubFactory<SearchServiceBlockingStub>() {
        @java.lang.Override
        public SearchServiceBlockingStub newStub(io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
          return new SearchServiceBlockingStub(channel, callOptions);
        }
      };
    return SearchServiceBlockingStub.newStub(factory, channel);
  }

  /**
   * Creates a new ListenableFuture-style stub that supports unary calls on the service
   */
  public static SearchServiceFutureStub newFutureStub(
      io.grpc.Channel channel) {
    io.grpc.stub.AbstractStub.StubFactory<SearchServiceFutureStub> factory =
      new io.grpc.stub.AbstractStub.StubFactory<SearchServiceFutureStub>() {
        @java.lang.Override
        public SearchServiceFutureStub newStub(io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
          return new SearchServiceFutureStub(channel, callOptions);
        }
      };
    return SearchServiceFutureStub.newStub(factory, channel);
  }

  /**
   * <pre>
   * Reads: lists, lookups and live streams of jobs and runs.
   * Filters are a subset of AIP-160: comparisons joined by `AND` (`OR` inside parentheses is not supported).
   * Operators `=`, `!=`, `&lt;`, `&lt;=`, `&gt;`, `&gt;=` and `:` (has). Values are quoted strings, numbers, enum names, or
   * RFC 3339 timestamps in quotes. An unknown field or operator is `INVALID_ARGUMENT`. For jobs' `display_name`
   * and `name`, `*` in an `=` or `!=` value matches any characters, ignoring case (`display_name = "*report*"`).
   * Every resource is in a namespace, and every list and stream is scoped to the namespaces where the caller holds
   * the viewer role: a filter naming another namespace finds nothing. `namespace` filters further.
   * Jobs: `namespace`, `state` (`ACTIVE`, `PAUSED`, `COMPLETED`, `DELETED`), `schedule` (`IMMEDIATE`, `RUN_AT`, `CRON`),
   * `priority`, `queue`, `display_name`, `labels.KEY`, `labels:KEY`, `create_time`, `update_time`,
   * `next_run_time`.
   * Runs: `namespace`, `state` (a `RunState` name without its prefix; also `DEAD_LETTERED`), `job` (`jobs/{job}`), `attempt`,
   * `trigger`, `executor`, `labels.KEY` (the job's labels), `schedule_time`, `due_time`, `start_time`,
   * `end_time`, `create_time`, `update_time`.
   * Audit events: `namespace`, `actor`, `action` (an `AuditAction` name without its prefix), `resource` (a job or
   * run name), `job` (`jobs/{job}`: the job and its runs), `request_id`, `time`.
   * </pre>
   */
  public interface AsyncService {

    /**
     * <pre>
     * Lists jobs. Deleted jobs are left out unless `show_deleted` is set.
     * </pre>
     */
    default void listJobs(dev.jobmesh.v1.ListJobsRequest request,
        io.grpc.stub.StreamObserver<dev.jobmesh.v1.ListJobsResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getListJobsMethod(), responseObserver);
    }

    /**
     * <pre>
     * Lists the runs of one job (`parent` = `jobs/{job}`) or of all jobs (`parent` = `jobs/-`). Upcoming runs
     * (made ahead of their time, still `SCHEDULED`) are listed only with `show_upcoming`.
     * </pre>
     */
    default void listRuns(dev.jobmesh.v1.ListRunsRequest request,
        io.grpc.stub.StreamObserver<dev.jobmesh.v1.ListRunsResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getListRunsMethod(), responseObserver);
    }

    /**
     * <pre>
     * Gets a run.
     * </pre>
     */
    default void getRun(dev.jobmesh.v1.GetRunRequest request,
        io.grpc.stub.StreamObserver<dev.jobmesh.v1.GetRunResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getGetRunMethod(), responseObserver);
    }

    /**
     * <pre>
     * Streams runs as they change, for as long as the caller listens. The first message comes at once and holds
     * the runs that match now (up to `initial_page_size`; upcoming runs only with `show_upcoming`, as in
     * `ListRuns`); the next ones hold each change that matches, in the
     * order the changes were committed. A run may come again in a state it was already sent in; its
     * `update_time` and `etag` tell. Every message carries a `resume_token`: a new stream given it starts
     * just after that message, so nothing is missed across a reconnect.
     * A stream whose reader falls too far behind ends with `RESOURCE_EXHAUSTED` (reason `STREAM_FELL_BEHIND`,
     * its `ErrorInfo` holding the `resume_token` to resume from), as does one past the server's limit of
     * streams for one client or in all (reason `TOO_MANY_STREAMS`).
     * </pre>
     */
    default void watchRuns(dev.jobmesh.v1.WatchRunsRequest request,
        io.grpc.stub.StreamObserver<dev.jobmesh.v1.WatchRunsResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getWatchRunsMethod(), responseObserver);
    }

    /**
     * <pre>
     * Counts the runs per namespace, queue and state in the namespaces the caller may read (`parent` =
     * `jobs/-`). The mesh keeps the counts as runs change: reading them costs a few rows, whatever the
     * number of runs. Each count equals what `ListRuns` lists with that `state` (and `namespace` and `queue`)
     * filter; upcoming runs, which `ListRuns` lists only with `show_upcoming`, are counted apart.
     * </pre>
     */
    default void countRuns(dev.jobmesh.v1.CountRunsRequest request,
        io.grpc.stub.StreamObserver<dev.jobmesh.v1.CountRunsResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getCountRunsMethod(), responseObserver);
    }

    /**
     * <pre>
     * Streams a run's log lines, then follows new ones until the run ends (when `follow` is set).
     * </pre>
     */
    default void tailRunLogs(dev.jobmesh.v1.TailRunLogsRequest request,
        io.grpc.stub.StreamObserver<dev.jobmesh.v1.TailRunLogsResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getTailRunLogsMethod(), responseObserver);
    }

    /**
     * <pre>
     * The next fire times of a schedule, computed as the watcher computes them (time zone, daylight saving,
     * `start_time` and `end_time` included; a job's jitter is not applied). Nothing is written: a dashboard
     * shows them for a job, or for a schedule being typed.
     * </pre>
     */
    default void previewSchedule(dev.jobmesh.v1.PreviewScheduleRequest request,
        io.grpc.stub.StreamObserver<dev.jobmesh.v1.PreviewScheduleResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getPreviewScheduleMethod(), responseObserver);
    }

    /**
     * <pre>
     * Lists the audit trail: the changes made through `JobService`, newest first.
     * </pre>
     */
    default void listAuditEvents(dev.jobmesh.v1.ListAuditEventsRequest request,
        io.grpc.stub.StreamObserver<dev.jobmesh.v1.ListAuditEventsResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getListAuditEventsMethod(), responseObserver);
    }
  }

  /**
   * Base class for the server implementation of the service SearchService.
   * <pre>
   * Reads: lists, lookups and live streams of jobs and runs.
   * Filters are a subset of AIP-160: comparisons joined by `AND` (`OR` inside parentheses is not supported).
   * Operators `=`, `!=`, `&lt;`, `&lt;=`, `&gt;`, `&gt;=` and `:` (has). Values are quoted strings, numbers, enum names, or
   * RFC 3339 timestamps in quotes. An unknown field or operator is `INVALID_ARGUMENT`. For jobs' `display_name`
   * and `name`, `*` in an `=` or `!=` value matches any characters, ignoring case (`display_name = "*report*"`).
   * Every resource is in a namespace, and every list and stream is scoped to the namespaces where the caller holds
   * the viewer role: a filter naming another namespace finds nothing. `namespace` filters further.
   * Jobs: `namespace`, `state` (`ACTIVE`, `PAUSED`, `COMPLETED`, `DELETED`), `schedule` (`IMMEDIATE`, `RUN_AT`, `CRON`),
   * `priority`, `queue`, `display_name`, `labels.KEY`, `labels:KEY`, `create_time`, `update_time`,
   * `next_run_time`.
   * Runs: `namespace`, `state` (a `RunState` name without its prefix; also `DEAD_LETTERED`), `job` (`jobs/{job}`), `attempt`,
   * `trigger`, `executor`, `labels.KEY` (the job's labels), `schedule_time`, `due_time`, `start_time`,
   * `end_time`, `create_time`, `update_time`.
   * Audit events: `namespace`, `actor`, `action` (an `AuditAction` name without its prefix), `resource` (a job or
   * run name), `job` (`jobs/{job}`: the job and its runs), `request_id`, `time`.
   * </pre>
   */
  public static abstract class SearchServiceImplBase
      implements io.grpc.BindableService, AsyncService {

    @java.lang.Override public final io.grpc.ServerServiceDefinition bindService() {
      return SearchServiceGrpc.bindService(this);
    }
  }

  /**
   * A stub to allow clients to do asynchronous rpc calls to service SearchService.
   * <pre>
   * Reads: lists, lookups and live streams of jobs and runs.
   * Filters are a subset of AIP-160: comparisons joined by `AND` (`OR` inside parentheses is not supported).
   * Operators `=`, `!=`, `&lt;`, `&lt;=`, `&gt;`, `&gt;=` and `:` (has). Values are quoted strings, numbers, enum names, or
   * RFC 3339 timestamps in quotes. An unknown field or operator is `INVALID_ARGUMENT`. For jobs' `display_name`
   * and `name`, `*` in an `=` or `!=` value matches any characters, ignoring case (`display_name = "*report*"`).
   * Every resource is in a namespace, and every list and stream is scoped to the namespaces where the caller holds
   * the viewer role: a filter naming another namespace finds nothing. `namespace` filters further.
   * Jobs: `namespace`, `state` (`ACTIVE`, `PAUSED`, `COMPLETED`, `DELETED`), `schedule` (`IMMEDIATE`, `RUN_AT`, `CRON`),
   * `priority`, `queue`, `display_name`, `labels.KEY`, `labels:KEY`, `create_time`, `update_time`,
   * `next_run_time`.
   * Runs: `namespace`, `state` (a `RunState` name without its prefix; also `DEAD_LETTERED`), `job` (`jobs/{job}`), `attempt`,
   * `trigger`, `executor`, `labels.KEY` (the job's labels), `schedule_time`, `due_time`, `start_time`,
   * `end_time`, `create_time`, `update_time`.
   * Audit events: `namespace`, `actor`, `action` (an `AuditAction` name without its prefix), `resource` (a job or
   * run name), `job` (`jobs/{job}`: the job and its runs), `request_id`, `time`.
   * </pre>
   */
  public static final class SearchServiceStub
      extends io.grpc.stub.AbstractAsyncStub<SearchServiceStub> {
    private SearchServiceStub(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      super(channel, callOptions);
    }

    @java.lang.Override
    protected SearchServiceStub build(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      return new SearchServiceStub(channel, callOptions);
    }

    /**
     * <pre>
     * Lists jobs. Deleted jobs are left out unless `show_deleted` is set.
     * </pre>
     */
    public void listJobs(dev.jobmesh.v1.ListJobsRequest request,
        io.grpc.stub.StreamObserver<dev.jobmesh.v1.ListJobsResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getListJobsMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Lists the runs of one job (`parent` = `jobs/{job}`) or of all jobs (`parent` = `jobs/-`). Upcoming runs
     * (made ahead of their time, still `SCHEDULED`) are listed only with `show_upcoming`.
     * </pre>
     */
    public void listRuns(dev.jobmesh.v1.ListRunsRequest request,
        io.grpc.stub.StreamObserver<dev.jobmesh.v1.ListRunsResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getListRunsMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Gets a run.
     * </pre>
     */
    public void getRun(dev.jobmesh.v1.GetRunRequest request,
        io.grpc.stub.StreamObserver<dev.jobmesh.v1.GetRunResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getGetRunMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Streams runs as they change, for as long as the caller listens. The first message comes at once and holds
     * the runs that match now (up to `initial_page_size`; upcoming runs only with `show_upcoming`, as in
     * `ListRuns`); the next ones hold each change that matches, in the
     * order the changes were committed. A run may come again in a state it was already sent in; its
     * `update_time` and `etag` tell. Every message carries a `resume_token`: a new stream given it starts
     * just after that message, so nothing is missed across a reconnect.
     * A stream whose reader falls too far behind ends with `RESOURCE_EXHAUSTED` (reason `STREAM_FELL_BEHIND`,
     * its `ErrorInfo` holding the `resume_token` to resume from), as does one past the server's limit of
     * streams for one client or in all (reason `TOO_MANY_STREAMS`).
     * </pre>
     */
    public void watchRuns(dev.jobmesh.v1.WatchRunsRequest request,
        io.grpc.stub.StreamObserver<dev.jobmesh.v1.WatchRunsResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncServerStreamingCall(
          getChannel().newCall(getWatchRunsMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Counts the runs per namespace, queue and state in the namespaces the caller may read (`parent` =
     * `jobs/-`). The mesh keeps the counts as runs change: reading them costs a few rows, whatever the
     * number of runs. Each count equals what `ListRuns` lists with that `state` (and `namespace` and `queue`)
     * filter; upcoming runs, which `ListRuns` lists only with `show_upcoming`, are counted apart.
     * </pre>
     */
    public void countRuns(dev.jobmesh.v1.CountRunsRequest request,
        io.grpc.stub.StreamObserver<dev.jobmesh.v1.CountRunsResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getCountRunsMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Streams a run's log lines, then follows new ones until the run ends (when `follow` is set).
     * </pre>
     */
    public void tailRunLogs(dev.jobmesh.v1.TailRunLogsRequest request,
        io.grpc.stub.StreamObserver<dev.jobmesh.v1.TailRunLogsResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncServerStreamingCall(
          getChannel().newCall(getTailRunLogsMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * The next fire times of a schedule, computed as the watcher computes them (time zone, daylight saving,
     * `start_time` and `end_time` included; a job's jitter is not applied). Nothing is written: a dashboard
     * shows them for a job, or for a schedule being typed.
     * </pre>
     */
    public void previewSchedule(dev.jobmesh.v1.PreviewScheduleRequest request,
        io.grpc.stub.StreamObserver<dev.jobmesh.v1.PreviewScheduleResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getPreviewScheduleMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Lists the audit trail: the changes made through `JobService`, newest first.
     * </pre>
     */
    public void listAuditEvents(dev.jobmesh.v1.ListAuditEventsRequest request,
        io.grpc.stub.StreamObserver<dev.jobmesh.v1.ListAuditEventsResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getListAuditEventsMethod(), getCallOptions()), request, responseObserver);
    }
  }

  /**
   * A stub to allow clients to do synchronous rpc calls to service SearchService.
   * <pre>
   * Reads: lists, lookups and live streams of jobs and runs.
   * Filters are a subset of AIP-160: comparisons joined by `AND` (`OR` inside parentheses is not supported).
   * Operators `=`, `!=`, `&lt;`, `&lt;=`, `&gt;`, `&gt;=` and `:` (has). Values are quoted strings, numbers, enum names, or
   * RFC 3339 timestamps in quotes. An unknown field or operator is `INVALID_ARGUMENT`. For jobs' `display_name`
   * and `name`, `*` in an `=` or `!=` value matches any characters, ignoring case (`display_name = "*report*"`).
   * Every resource is in a namespace, and every list and stream is scoped to the namespaces where the caller holds
   * the viewer role: a filter naming another namespace finds nothing. `namespace` filters further.
   * Jobs: `namespace`, `state` (`ACTIVE`, `PAUSED`, `COMPLETED`, `DELETED`), `schedule` (`IMMEDIATE`, `RUN_AT`, `CRON`),
   * `priority`, `queue`, `display_name`, `labels.KEY`, `labels:KEY`, `create_time`, `update_time`,
   * `next_run_time`.
   * Runs: `namespace`, `state` (a `RunState` name without its prefix; also `DEAD_LETTERED`), `job` (`jobs/{job}`), `attempt`,
   * `trigger`, `executor`, `labels.KEY` (the job's labels), `schedule_time`, `due_time`, `start_time`,
   * `end_time`, `create_time`, `update_time`.
   * Audit events: `namespace`, `actor`, `action` (an `AuditAction` name without its prefix), `resource` (a job or
   * run name), `job` (`jobs/{job}`: the job and its runs), `request_id`, `time`.
   * </pre>
   */
  public static final class SearchServiceBlockingV2Stub
      extends io.grpc.stub.AbstractBlockingStub<SearchServiceBlockingV2Stub> {
    private SearchServiceBlockingV2Stub(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      super(channel, callOptions);
    }

    @java.lang.Override
    protected SearchServiceBlockingV2Stub build(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      return new SearchServiceBlockingV2Stub(channel, callOptions);
    }

    /**
     * <pre>
     * Lists jobs. Deleted jobs are left out unless `show_deleted` is set.
     * </pre>
     */
    public dev.jobmesh.v1.ListJobsResponse listJobs(dev.jobmesh.v1.ListJobsRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getListJobsMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Lists the runs of one job (`parent` = `jobs/{job}`) or of all jobs (`parent` = `jobs/-`). Upcoming runs
     * (made ahead of their time, still `SCHEDULED`) are listed only with `show_upcoming`.
     * </pre>
     */
    public dev.jobmesh.v1.ListRunsResponse listRuns(dev.jobmesh.v1.ListRunsRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getListRunsMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Gets a run.
     * </pre>
     */
    public dev.jobmesh.v1.GetRunResponse getRun(dev.jobmesh.v1.GetRunRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getGetRunMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Streams runs as they change, for as long as the caller listens. The first message comes at once and holds
     * the runs that match now (up to `initial_page_size`; upcoming runs only with `show_upcoming`, as in
     * `ListRuns`); the next ones hold each change that matches, in the
     * order the changes were committed. A run may come again in a state it was already sent in; its
     * `update_time` and `etag` tell. Every message carries a `resume_token`: a new stream given it starts
     * just after that message, so nothing is missed across a reconnect.
     * A stream whose reader falls too far behind ends with `RESOURCE_EXHAUSTED` (reason `STREAM_FELL_BEHIND`,
     * its `ErrorInfo` holding the `resume_token` to resume from), as does one past the server's limit of
     * streams for one client or in all (reason `TOO_MANY_STREAMS`).
     * </pre>
     */
    @io.grpc.ExperimentalApi("https://github.com/grpc/grpc-java/issues/10918")
    public io.grpc.stub.BlockingClientCall<?, dev.jobmesh.v1.WatchRunsResponse>
        watchRuns(dev.jobmesh.v1.WatchRunsRequest request) {
      return io.grpc.stub.ClientCalls.blockingV2ServerStreamingCall(
          getChannel(), getWatchRunsMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Counts the runs per namespace, queue and state in the namespaces the caller may read (`parent` =
     * `jobs/-`). The mesh keeps the counts as runs change: reading them costs a few rows, whatever the
     * number of runs. Each count equals what `ListRuns` lists with that `state` (and `namespace` and `queue`)
     * filter; upcoming runs, which `ListRuns` lists only with `show_upcoming`, are counted apart.
     * </pre>
     */
    public dev.jobmesh.v1.CountRunsResponse countRuns(dev.jobmesh.v1.CountRunsRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getCountRunsMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Streams a run's log lines, then follows new ones until the run ends (when `follow` is set).
     * </pre>
     */
    @io.grpc.ExperimentalApi("https://github.com/grpc/grpc-java/issues/10918")
    public io.grpc.stub.BlockingClientCall<?, dev.jobmesh.v1.TailRunLogsResponse>
        tailRunLogs(dev.jobmesh.v1.TailRunLogsRequest request) {
      return io.grpc.stub.ClientCalls.blockingV2ServerStreamingCall(
          getChannel(), getTailRunLogsMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * The next fire times of a schedule, computed as the watcher computes them (time zone, daylight saving,
     * `start_time` and `end_time` included; a job's jitter is not applied). Nothing is written: a dashboard
     * shows them for a job, or for a schedule being typed.
     * </pre>
     */
    public dev.jobmesh.v1.PreviewScheduleResponse previewSchedule(dev.jobmesh.v1.PreviewScheduleRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getPreviewScheduleMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Lists the audit trail: the changes made through `JobService`, newest first.
     * </pre>
     */
    public dev.jobmesh.v1.ListAuditEventsResponse listAuditEvents(dev.jobmesh.v1.ListAuditEventsRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getListAuditEventsMethod(), getCallOptions(), request);
    }
  }

  /**
   * A stub to allow clients to do limited synchronous rpc calls to service SearchService.
   * <pre>
   * Reads: lists, lookups and live streams of jobs and runs.
   * Filters are a subset of AIP-160: comparisons joined by `AND` (`OR` inside parentheses is not supported).
   * Operators `=`, `!=`, `&lt;`, `&lt;=`, `&gt;`, `&gt;=` and `:` (has). Values are quoted strings, numbers, enum names, or
   * RFC 3339 timestamps in quotes. An unknown field or operator is `INVALID_ARGUMENT`. For jobs' `display_name`
   * and `name`, `*` in an `=` or `!=` value matches any characters, ignoring case (`display_name = "*report*"`).
   * Every resource is in a namespace, and every list and stream is scoped to the namespaces where the caller holds
   * the viewer role: a filter naming another namespace finds nothing. `namespace` filters further.
   * Jobs: `namespace`, `state` (`ACTIVE`, `PAUSED`, `COMPLETED`, `DELETED`), `schedule` (`IMMEDIATE`, `RUN_AT`, `CRON`),
   * `priority`, `queue`, `display_name`, `labels.KEY`, `labels:KEY`, `create_time`, `update_time`,
   * `next_run_time`.
   * Runs: `namespace`, `state` (a `RunState` name without its prefix; also `DEAD_LETTERED`), `job` (`jobs/{job}`), `attempt`,
   * `trigger`, `executor`, `labels.KEY` (the job's labels), `schedule_time`, `due_time`, `start_time`,
   * `end_time`, `create_time`, `update_time`.
   * Audit events: `namespace`, `actor`, `action` (an `AuditAction` name without its prefix), `resource` (a job or
   * run name), `job` (`jobs/{job}`: the job and its runs), `request_id`, `time`.
   * </pre>
   */
  public static final class SearchServiceBlockingStub
      extends io.grpc.stub.AbstractBlockingStub<SearchServiceBlockingStub> {
    private SearchServiceBlockingStub(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      super(channel, callOptions);
    }

    @java.lang.Override
    protected SearchServiceBlockingStub build(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      return new SearchServiceBlockingStub(channel, callOptions);
    }

    /**
     * <pre>
     * Lists jobs. Deleted jobs are left out unless `show_deleted` is set.
     * </pre>
     */
    public dev.jobmesh.v1.ListJobsResponse listJobs(dev.jobmesh.v1.ListJobsRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getListJobsMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Lists the runs of one job (`parent` = `jobs/{job}`) or of all jobs (`parent` = `jobs/-`). Upcoming runs
     * (made ahead of their time, still `SCHEDULED`) are listed only with `show_upcoming`.
     * </pre>
     */
    public dev.jobmesh.v1.ListRunsResponse listRuns(dev.jobmesh.v1.ListRunsRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getListRunsMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Gets a run.
     * </pre>
     */
    public dev.jobmesh.v1.GetRunResponse getRun(dev.jobmesh.v1.GetRunRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getGetRunMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Streams runs as they change, for as long as the caller listens. The first message comes at once and holds
     * the runs that match now (up to `initial_page_size`; upcoming runs only with `show_upcoming`, as in
     * `ListRuns`); the next ones hold each change that matches, in the
     * order the changes were committed. A run may come again in a state it was already sent in; its
     * `update_time` and `etag` tell. Every message carries a `resume_token`: a new stream given it starts
     * just after that message, so nothing is missed across a reconnect.
     * A stream whose reader falls too far behind ends with `RESOURCE_EXHAUSTED` (reason `STREAM_FELL_BEHIND`,
     * its `ErrorInfo` holding the `resume_token` to resume from), as does one past the server's limit of
     * streams for one client or in all (reason `TOO_MANY_STREAMS`).
     * </pre>
     */
    public java.util.Iterator<dev.jobmesh.v1.WatchRunsResponse> watchRuns(
        dev.jobmesh.v1.WatchRunsRequest request) {
      return io.grpc.stub.ClientCalls.blockingServerStreamingCall(
          getChannel(), getWatchRunsMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Counts the runs per namespace, queue and state in the namespaces the caller may read (`parent` =
     * `jobs/-`). The mesh keeps the counts as runs change: reading them costs a few rows, whatever the
     * number of runs. Each count equals what `ListRuns` lists with that `state` (and `namespace` and `queue`)
     * filter; upcoming runs, which `ListRuns` lists only with `show_upcoming`, are counted apart.
     * </pre>
     */
    public dev.jobmesh.v1.CountRunsResponse countRuns(dev.jobmesh.v1.CountRunsRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getCountRunsMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Streams a run's log lines, then follows new ones until the run ends (when `follow` is set).
     * </pre>
     */
    public java.util.Iterator<dev.jobmesh.v1.TailRunLogsResponse> tailRunLogs(
        dev.jobmesh.v1.TailRunLogsRequest request) {
      return io.grpc.stub.ClientCalls.blockingServerStreamingCall(
          getChannel(), getTailRunLogsMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * The next fire times of a schedule, computed as the watcher computes them (time zone, daylight saving,
     * `start_time` and `end_time` included; a job's jitter is not applied). Nothing is written: a dashboard
     * shows them for a job, or for a schedule being typed.
     * </pre>
     */
    public dev.jobmesh.v1.PreviewScheduleResponse previewSchedule(dev.jobmesh.v1.PreviewScheduleRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getPreviewScheduleMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Lists the audit trail: the changes made through `JobService`, newest first.
     * </pre>
     */
    public dev.jobmesh.v1.ListAuditEventsResponse listAuditEvents(dev.jobmesh.v1.ListAuditEventsRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getListAuditEventsMethod(), getCallOptions(), request);
    }
  }

  /**
   * A stub to allow clients to do ListenableFuture-style rpc calls to service SearchService.
   * <pre>
   * Reads: lists, lookups and live streams of jobs and runs.
   * Filters are a subset of AIP-160: comparisons joined by `AND` (`OR` inside parentheses is not supported).
   * Operators `=`, `!=`, `&lt;`, `&lt;=`, `&gt;`, `&gt;=` and `:` (has). Values are quoted strings, numbers, enum names, or
   * RFC 3339 timestamps in quotes. An unknown field or operator is `INVALID_ARGUMENT`. For jobs' `display_name`
   * and `name`, `*` in an `=` or `!=` value matches any characters, ignoring case (`display_name = "*report*"`).
   * Every resource is in a namespace, and every list and stream is scoped to the namespaces where the caller holds
   * the viewer role: a filter naming another namespace finds nothing. `namespace` filters further.
   * Jobs: `namespace`, `state` (`ACTIVE`, `PAUSED`, `COMPLETED`, `DELETED`), `schedule` (`IMMEDIATE`, `RUN_AT`, `CRON`),
   * `priority`, `queue`, `display_name`, `labels.KEY`, `labels:KEY`, `create_time`, `update_time`,
   * `next_run_time`.
   * Runs: `namespace`, `state` (a `RunState` name without its prefix; also `DEAD_LETTERED`), `job` (`jobs/{job}`), `attempt`,
   * `trigger`, `executor`, `labels.KEY` (the job's labels), `schedule_time`, `due_time`, `start_time`,
   * `end_time`, `create_time`, `update_time`.
   * Audit events: `namespace`, `actor`, `action` (an `AuditAction` name without its prefix), `resource` (a job or
   * run name), `job` (`jobs/{job}`: the job and its runs), `request_id`, `time`.
   * </pre>
   */
  public static final class SearchServiceFutureStub
      extends io.grpc.stub.AbstractFutureStub<SearchServiceFutureStub> {
    private SearchServiceFutureStub(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      super(channel, callOptions);
    }

    @java.lang.Override
    protected SearchServiceFutureStub build(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      return new SearchServiceFutureStub(channel, callOptions);
    }

    /**
     * <pre>
     * Lists jobs. Deleted jobs are left out unless `show_deleted` is set.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<dev.jobmesh.v1.ListJobsResponse> listJobs(
        dev.jobmesh.v1.ListJobsRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getListJobsMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * Lists the runs of one job (`parent` = `jobs/{job}`) or of all jobs (`parent` = `jobs/-`). Upcoming runs
     * (made ahead of their time, still `SCHEDULED`) are listed only with `show_upcoming`.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<dev.jobmesh.v1.ListRunsResponse> listRuns(
        dev.jobmesh.v1.ListRunsRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getListRunsMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * Gets a run.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<dev.jobmesh.v1.GetRunResponse> getRun(
        dev.jobmesh.v1.GetRunRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getGetRunMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * Counts the runs per namespace, queue and state in the namespaces the caller may read (`parent` =
     * `jobs/-`). The mesh keeps the counts as runs change: reading them costs a few rows, whatever the
     * number of runs. Each count equals what `ListRuns` lists with that `state` (and `namespace` and `queue`)
     * filter; upcoming runs, which `ListRuns` lists only with `show_upcoming`, are counted apart.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<dev.jobmesh.v1.CountRunsResponse> countRuns(
        dev.jobmesh.v1.CountRunsRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getCountRunsMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * The next fire times of a schedule, computed as the watcher computes them (time zone, daylight saving,
     * `start_time` and `end_time` included; a job's jitter is not applied). Nothing is written: a dashboard
     * shows them for a job, or for a schedule being typed.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<dev.jobmesh.v1.PreviewScheduleResponse> previewSchedule(
        dev.jobmesh.v1.PreviewScheduleRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getPreviewScheduleMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * Lists the audit trail: the changes made through `JobService`, newest first.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<dev.jobmesh.v1.ListAuditEventsResponse> listAuditEvents(
        dev.jobmesh.v1.ListAuditEventsRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getListAuditEventsMethod(), getCallOptions()), request);
    }
  }

  private static final int METHODID_LIST_JOBS = 0;
  private static final int METHODID_LIST_RUNS = 1;
  private static final int METHODID_GET_RUN = 2;
  private static final int METHODID_WATCH_RUNS = 3;
  private static final int METHODID_COUNT_RUNS = 4;
  private static final int METHODID_TAIL_RUN_LOGS = 5;
  private static final int METHODID_PREVIEW_SCHEDULE = 6;
  private static final int METHODID_LIST_AUDIT_EVENTS = 7;

  private static final class MethodHandlers<Req, Resp> implements
      io.grpc.stub.ServerCalls.UnaryMethod<Req, Resp>,
      io.grpc.stub.ServerCalls.ServerStreamingMethod<Req, Resp>,
      io.grpc.stub.ServerCalls.ClientStreamingMethod<Req, Resp>,
      io.grpc.stub.ServerCalls.BidiStreamingMethod<Req, Resp> {
    private final AsyncService serviceImpl;
    private final int methodId;

    MethodHandlers(AsyncService serviceImpl, int methodId) {
      this.serviceImpl = serviceImpl;
      this.methodId = methodId;
    }

    @java.lang.Override
    @java.lang.SuppressWarnings("unchecked")
    public void invoke(Req request, io.grpc.stub.StreamObserver<Resp> responseObserver) {
      switch (methodId) {
        case METHODID_LIST_JOBS:
          serviceImpl.listJobs((dev.jobmesh.v1.ListJobsRequest) request,
              (io.grpc.stub.StreamObserver<dev.jobmesh.v1.ListJobsResponse>) responseObserver);
          break;
        case METHODID_LIST_RUNS:
          serviceImpl.listRuns((dev.jobmesh.v1.ListRunsRequest) request,
              (io.grpc.stub.StreamObserver<dev.jobmesh.v1.ListRunsResponse>) responseObserver);
          break;
        case METHODID_GET_RUN:
          serviceImpl.getRun((dev.jobmesh.v1.GetRunRequest) request,
              (io.grpc.stub.StreamObserver<dev.jobmesh.v1.GetRunResponse>) responseObserver);
          break;
        case METHODID_WATCH_RUNS:
          serviceImpl.watchRuns((dev.jobmesh.v1.WatchRunsRequest) request,
              (io.grpc.stub.StreamObserver<dev.jobmesh.v1.WatchRunsResponse>) responseObserver);
          break;
        case METHODID_COUNT_RUNS:
          serviceImpl.countRuns((dev.jobmesh.v1.CountRunsRequest) request,
              (io.grpc.stub.StreamObserver<dev.jobmesh.v1.CountRunsResponse>) responseObserver);
          break;
        case METHODID_TAIL_RUN_LOGS:
          serviceImpl.tailRunLogs((dev.jobmesh.v1.TailRunLogsRequest) request,
              (io.grpc.stub.StreamObserver<dev.jobmesh.v1.TailRunLogsResponse>) responseObserver);
          break;
        case METHODID_PREVIEW_SCHEDULE:
          serviceImpl.previewSchedule((dev.jobmesh.v1.PreviewScheduleRequest) request,
              (io.grpc.stub.StreamObserver<dev.jobmesh.v1.PreviewScheduleResponse>) responseObserver);
          break;
        case METHODID_LIST_AUDIT_EVENTS:
          serviceImpl.listAuditEvents((dev.jobmesh.v1.ListAuditEventsRequest) request,
              (io.grpc.stub.StreamObserver<dev.jobmesh.v1.ListAuditEventsResponse>) responseObserver);
          break;
        default:
          throw new AssertionError();
      }
    }

    @java.lang.Override
    @java.lang.SuppressWarnings("unchecked")
    public io.grpc.stub.StreamObserver<Req> invoke(
        io.grpc.stub.StreamObserver<Resp> responseObserver) {
      switch (methodId) {
        default:
          throw new AssertionError();
      }
    }
  }

  public static final io.grpc.ServerServiceDefinition bindService(AsyncService service) {
    return io.grpc.ServerServiceDefinition.builder(getServiceDescriptor())
        .addMethod(
          getListJobsMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              dev.jobmesh.v1.ListJobsRequest,
              dev.jobmesh.v1.ListJobsResponse>(
                service, METHODID_LIST_JOBS)))
        .addMethod(
          getListRunsMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              dev.jobmesh.v1.ListRunsRequest,
              dev.jobmesh.v1.ListRunsResponse>(
                service, METHODID_LIST_RUNS)))
        .addMethod(
          getGetRunMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              dev.jobmesh.v1.GetRunRequest,
              dev.jobmesh.v1.GetRunResponse>(
                service, METHODID_GET_RUN)))
        .addMethod(
          getWatchRunsMethod(),
          io.grpc.stub.ServerCalls.asyncServerStreamingCall(
            new MethodHandlers<
              dev.jobmesh.v1.WatchRunsRequest,
              dev.jobmesh.v1.WatchRunsResponse>(
                service, METHODID_WATCH_RUNS)))
        .addMethod(
          getCountRunsMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              dev.jobmesh.v1.CountRunsRequest,
              dev.jobmesh.v1.CountRunsResponse>(
                service, METHODID_COUNT_RUNS)))
        .addMethod(
          getTailRunLogsMethod(),
          io.grpc.stub.ServerCalls.asyncServerStreamingCall(
            new MethodHandlers<
              dev.jobmesh.v1.TailRunLogsRequest,
              dev.jobmesh.v1.TailRunLogsResponse>(
                service, METHODID_TAIL_RUN_LOGS)))
        .addMethod(
          getPreviewScheduleMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              dev.jobmesh.v1.PreviewScheduleRequest,
              dev.jobmesh.v1.PreviewScheduleResponse>(
                service, METHODID_PREVIEW_SCHEDULE)))
        .addMethod(
          getListAuditEventsMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              dev.jobmesh.v1.ListAuditEventsRequest,
              dev.jobmesh.v1.ListAuditEventsResponse>(
                service, METHODID_LIST_AUDIT_EVENTS)))
        .build();
  }

  private static abstract class SearchServiceBaseDescriptorSupplier
      implements io.grpc.protobuf.ProtoFileDescriptorSupplier, io.grpc.protobuf.ProtoServiceDescriptorSupplier {
    SearchServiceBaseDescriptorSupplier() {}

    @java.lang.Override
    public com.google.protobuf.Descriptors.FileDescriptor getFileDescriptor() {
      return dev.jobmesh.v1.SearchServiceProto.getDescriptor();
    }

    @java.lang.Override
    public com.google.protobuf.Descriptors.ServiceDescriptor getServiceDescriptor() {
      return getFileDescriptor().findServiceByName("SearchService");
    }
  }

  private static final class SearchServiceFileDescriptorSupplier
      extends SearchServiceBaseDescriptorSupplier {
    SearchServiceFileDescriptorSupplier() {}
  }

  private static final class SearchServiceMethodDescriptorSupplier
      extends SearchServiceBaseDescriptorSupplier
      implements io.grpc.protobuf.ProtoMethodDescriptorSupplier {
    private final java.lang.String methodName;

    SearchServiceMethodDescriptorSupplier(java.lang.String methodName) {
      this.methodName = methodName;
    }

    @java.lang.Override
    public com.google.protobuf.Descriptors.MethodDescriptor getMethodDescriptor() {
      return getServiceDescriptor().findMethodByName(methodName);
    }
  }

  private static volatile io.grpc.ServiceDescriptor serviceDescriptor;

  public static io.grpc.ServiceDescriptor getServiceDescriptor() {
    io.grpc.ServiceDescriptor result = serviceDescriptor;
    if (result == null) {
      synchronized (SearchServiceGrpc.class) {
        result = serviceDescriptor;
        if (result == null) {
          serviceDescriptor = result = io.grpc.ServiceDescriptor.newBuilder(SERVICE_NAME)
              .setSchemaDescriptor(new SearchServiceFileDescriptorSupplier())
              .addMethod(getListJobsMethod())
              .addMethod(getListRunsMethod())
              .addMethod(getGetRunMethod())
              .addMethod(getWatchRunsMethod())
              .addMethod(getCountRunsMethod())
              .addMethod(getTailRunLogsMethod())
              .addMethod(getPreviewScheduleMethod())
              .addMethod(getListAuditEventsMethod())
              .build();
        }
      }
    }
    return result;
  }
}
