package dev.jobmesh.v1;

import static io.grpc.MethodDescriptor.generateFullMethodName;

/**
 * <pre>
 * Writes: create and steer jobs and their runs.
 * Errors carry a canonical code and `google.rpc` details: `INVALID_ARGUMENT` with `BadRequest` field violations
 * for bad input, `NOT_FOUND` for a missing job or run, `ABORTED` for a stale etag, `ALREADY_EXISTS` for a taken
 * job id or a `request_id` reused with a different request, `FAILED_PRECONDITION` for a verb the resource's
 * state does not allow. Every such error carries an `ErrorInfo`: its reasons, with their codes and metadata,
 * are listed in `ErrorReason` (errors.proto).
 * </pre>
 */
@io.grpc.stub.annotations.GrpcGenerated
public final class JobServiceGrpc {

  private JobServiceGrpc() {}

  public static final java.lang.String SERVICE_NAME = "jobmesh.v1.JobService";

  // Static method descriptors that strictly reflect the proto.
  private static volatile io.grpc.MethodDescriptor<dev.jobmesh.v1.CreateJobRequest,
      dev.jobmesh.v1.CreateJobResponse> getCreateJobMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "CreateJob",
      requestType = dev.jobmesh.v1.CreateJobRequest.class,
      responseType = dev.jobmesh.v1.CreateJobResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<dev.jobmesh.v1.CreateJobRequest,
      dev.jobmesh.v1.CreateJobResponse> getCreateJobMethod() {
    io.grpc.MethodDescriptor<dev.jobmesh.v1.CreateJobRequest, dev.jobmesh.v1.CreateJobResponse> getCreateJobMethod;
    if ((getCreateJobMethod = JobServiceGrpc.getCreateJobMethod) == null) {
      synchronized (JobServiceGrpc.class) {
        if ((getCreateJobMethod = JobServiceGrpc.getCreateJobMethod) == null) {
          JobServiceGrpc.getCreateJobMethod = getCreateJobMethod =
              io.grpc.MethodDescriptor.<dev.jobmesh.v1.CreateJobRequest, dev.jobmesh.v1.CreateJobResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "CreateJob"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.jobmesh.v1.CreateJobRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.jobmesh.v1.CreateJobResponse.getDefaultInstance()))
              .setSchemaDescriptor(new JobServiceMethodDescriptorSupplier("CreateJob"))
              .build();
        }
      }
    }
    return getCreateJobMethod;
  }

  private static volatile io.grpc.MethodDescriptor<dev.jobmesh.v1.BatchCreateJobsRequest,
      dev.jobmesh.v1.BatchCreateJobsResponse> getBatchCreateJobsMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "BatchCreateJobs",
      requestType = dev.jobmesh.v1.BatchCreateJobsRequest.class,
      responseType = dev.jobmesh.v1.BatchCreateJobsResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<dev.jobmesh.v1.BatchCreateJobsRequest,
      dev.jobmesh.v1.BatchCreateJobsResponse> getBatchCreateJobsMethod() {
    io.grpc.MethodDescriptor<dev.jobmesh.v1.BatchCreateJobsRequest, dev.jobmesh.v1.BatchCreateJobsResponse> getBatchCreateJobsMethod;
    if ((getBatchCreateJobsMethod = JobServiceGrpc.getBatchCreateJobsMethod) == null) {
      synchronized (JobServiceGrpc.class) {
        if ((getBatchCreateJobsMethod = JobServiceGrpc.getBatchCreateJobsMethod) == null) {
          JobServiceGrpc.getBatchCreateJobsMethod = getBatchCreateJobsMethod =
              io.grpc.MethodDescriptor.<dev.jobmesh.v1.BatchCreateJobsRequest, dev.jobmesh.v1.BatchCreateJobsResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "BatchCreateJobs"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.jobmesh.v1.BatchCreateJobsRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.jobmesh.v1.BatchCreateJobsResponse.getDefaultInstance()))
              .setSchemaDescriptor(new JobServiceMethodDescriptorSupplier("BatchCreateJobs"))
              .build();
        }
      }
    }
    return getBatchCreateJobsMethod;
  }

  private static volatile io.grpc.MethodDescriptor<dev.jobmesh.v1.GetJobRequest,
      dev.jobmesh.v1.GetJobResponse> getGetJobMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "GetJob",
      requestType = dev.jobmesh.v1.GetJobRequest.class,
      responseType = dev.jobmesh.v1.GetJobResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<dev.jobmesh.v1.GetJobRequest,
      dev.jobmesh.v1.GetJobResponse> getGetJobMethod() {
    io.grpc.MethodDescriptor<dev.jobmesh.v1.GetJobRequest, dev.jobmesh.v1.GetJobResponse> getGetJobMethod;
    if ((getGetJobMethod = JobServiceGrpc.getGetJobMethod) == null) {
      synchronized (JobServiceGrpc.class) {
        if ((getGetJobMethod = JobServiceGrpc.getGetJobMethod) == null) {
          JobServiceGrpc.getGetJobMethod = getGetJobMethod =
              io.grpc.MethodDescriptor.<dev.jobmesh.v1.GetJobRequest, dev.jobmesh.v1.GetJobResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "GetJob"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.jobmesh.v1.GetJobRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.jobmesh.v1.GetJobResponse.getDefaultInstance()))
              .setSchemaDescriptor(new JobServiceMethodDescriptorSupplier("GetJob"))
              .build();
        }
      }
    }
    return getGetJobMethod;
  }

  private static volatile io.grpc.MethodDescriptor<dev.jobmesh.v1.UpdateJobRequest,
      dev.jobmesh.v1.UpdateJobResponse> getUpdateJobMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "UpdateJob",
      requestType = dev.jobmesh.v1.UpdateJobRequest.class,
      responseType = dev.jobmesh.v1.UpdateJobResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<dev.jobmesh.v1.UpdateJobRequest,
      dev.jobmesh.v1.UpdateJobResponse> getUpdateJobMethod() {
    io.grpc.MethodDescriptor<dev.jobmesh.v1.UpdateJobRequest, dev.jobmesh.v1.UpdateJobResponse> getUpdateJobMethod;
    if ((getUpdateJobMethod = JobServiceGrpc.getUpdateJobMethod) == null) {
      synchronized (JobServiceGrpc.class) {
        if ((getUpdateJobMethod = JobServiceGrpc.getUpdateJobMethod) == null) {
          JobServiceGrpc.getUpdateJobMethod = getUpdateJobMethod =
              io.grpc.MethodDescriptor.<dev.jobmesh.v1.UpdateJobRequest, dev.jobmesh.v1.UpdateJobResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "UpdateJob"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.jobmesh.v1.UpdateJobRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.jobmesh.v1.UpdateJobResponse.getDefaultInstance()))
              .setSchemaDescriptor(new JobServiceMethodDescriptorSupplier("UpdateJob"))
              .build();
        }
      }
    }
    return getUpdateJobMethod;
  }

  private static volatile io.grpc.MethodDescriptor<dev.jobmesh.v1.DeleteJobRequest,
      dev.jobmesh.v1.DeleteJobResponse> getDeleteJobMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "DeleteJob",
      requestType = dev.jobmesh.v1.DeleteJobRequest.class,
      responseType = dev.jobmesh.v1.DeleteJobResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<dev.jobmesh.v1.DeleteJobRequest,
      dev.jobmesh.v1.DeleteJobResponse> getDeleteJobMethod() {
    io.grpc.MethodDescriptor<dev.jobmesh.v1.DeleteJobRequest, dev.jobmesh.v1.DeleteJobResponse> getDeleteJobMethod;
    if ((getDeleteJobMethod = JobServiceGrpc.getDeleteJobMethod) == null) {
      synchronized (JobServiceGrpc.class) {
        if ((getDeleteJobMethod = JobServiceGrpc.getDeleteJobMethod) == null) {
          JobServiceGrpc.getDeleteJobMethod = getDeleteJobMethod =
              io.grpc.MethodDescriptor.<dev.jobmesh.v1.DeleteJobRequest, dev.jobmesh.v1.DeleteJobResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "DeleteJob"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.jobmesh.v1.DeleteJobRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.jobmesh.v1.DeleteJobResponse.getDefaultInstance()))
              .setSchemaDescriptor(new JobServiceMethodDescriptorSupplier("DeleteJob"))
              .build();
        }
      }
    }
    return getDeleteJobMethod;
  }

  private static volatile io.grpc.MethodDescriptor<dev.jobmesh.v1.PauseJobRequest,
      dev.jobmesh.v1.PauseJobResponse> getPauseJobMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "PauseJob",
      requestType = dev.jobmesh.v1.PauseJobRequest.class,
      responseType = dev.jobmesh.v1.PauseJobResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<dev.jobmesh.v1.PauseJobRequest,
      dev.jobmesh.v1.PauseJobResponse> getPauseJobMethod() {
    io.grpc.MethodDescriptor<dev.jobmesh.v1.PauseJobRequest, dev.jobmesh.v1.PauseJobResponse> getPauseJobMethod;
    if ((getPauseJobMethod = JobServiceGrpc.getPauseJobMethod) == null) {
      synchronized (JobServiceGrpc.class) {
        if ((getPauseJobMethod = JobServiceGrpc.getPauseJobMethod) == null) {
          JobServiceGrpc.getPauseJobMethod = getPauseJobMethod =
              io.grpc.MethodDescriptor.<dev.jobmesh.v1.PauseJobRequest, dev.jobmesh.v1.PauseJobResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "PauseJob"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.jobmesh.v1.PauseJobRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.jobmesh.v1.PauseJobResponse.getDefaultInstance()))
              .setSchemaDescriptor(new JobServiceMethodDescriptorSupplier("PauseJob"))
              .build();
        }
      }
    }
    return getPauseJobMethod;
  }

  private static volatile io.grpc.MethodDescriptor<dev.jobmesh.v1.ResumeJobRequest,
      dev.jobmesh.v1.ResumeJobResponse> getResumeJobMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "ResumeJob",
      requestType = dev.jobmesh.v1.ResumeJobRequest.class,
      responseType = dev.jobmesh.v1.ResumeJobResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<dev.jobmesh.v1.ResumeJobRequest,
      dev.jobmesh.v1.ResumeJobResponse> getResumeJobMethod() {
    io.grpc.MethodDescriptor<dev.jobmesh.v1.ResumeJobRequest, dev.jobmesh.v1.ResumeJobResponse> getResumeJobMethod;
    if ((getResumeJobMethod = JobServiceGrpc.getResumeJobMethod) == null) {
      synchronized (JobServiceGrpc.class) {
        if ((getResumeJobMethod = JobServiceGrpc.getResumeJobMethod) == null) {
          JobServiceGrpc.getResumeJobMethod = getResumeJobMethod =
              io.grpc.MethodDescriptor.<dev.jobmesh.v1.ResumeJobRequest, dev.jobmesh.v1.ResumeJobResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "ResumeJob"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.jobmesh.v1.ResumeJobRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.jobmesh.v1.ResumeJobResponse.getDefaultInstance()))
              .setSchemaDescriptor(new JobServiceMethodDescriptorSupplier("ResumeJob"))
              .build();
        }
      }
    }
    return getResumeJobMethod;
  }

  private static volatile io.grpc.MethodDescriptor<dev.jobmesh.v1.RunJobNowRequest,
      dev.jobmesh.v1.RunJobNowResponse> getRunJobNowMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "RunJobNow",
      requestType = dev.jobmesh.v1.RunJobNowRequest.class,
      responseType = dev.jobmesh.v1.RunJobNowResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<dev.jobmesh.v1.RunJobNowRequest,
      dev.jobmesh.v1.RunJobNowResponse> getRunJobNowMethod() {
    io.grpc.MethodDescriptor<dev.jobmesh.v1.RunJobNowRequest, dev.jobmesh.v1.RunJobNowResponse> getRunJobNowMethod;
    if ((getRunJobNowMethod = JobServiceGrpc.getRunJobNowMethod) == null) {
      synchronized (JobServiceGrpc.class) {
        if ((getRunJobNowMethod = JobServiceGrpc.getRunJobNowMethod) == null) {
          JobServiceGrpc.getRunJobNowMethod = getRunJobNowMethod =
              io.grpc.MethodDescriptor.<dev.jobmesh.v1.RunJobNowRequest, dev.jobmesh.v1.RunJobNowResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "RunJobNow"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.jobmesh.v1.RunJobNowRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.jobmesh.v1.RunJobNowResponse.getDefaultInstance()))
              .setSchemaDescriptor(new JobServiceMethodDescriptorSupplier("RunJobNow"))
              .build();
        }
      }
    }
    return getRunJobNowMethod;
  }

  private static volatile io.grpc.MethodDescriptor<dev.jobmesh.v1.CancelRunRequest,
      dev.jobmesh.v1.CancelRunResponse> getCancelRunMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "CancelRun",
      requestType = dev.jobmesh.v1.CancelRunRequest.class,
      responseType = dev.jobmesh.v1.CancelRunResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<dev.jobmesh.v1.CancelRunRequest,
      dev.jobmesh.v1.CancelRunResponse> getCancelRunMethod() {
    io.grpc.MethodDescriptor<dev.jobmesh.v1.CancelRunRequest, dev.jobmesh.v1.CancelRunResponse> getCancelRunMethod;
    if ((getCancelRunMethod = JobServiceGrpc.getCancelRunMethod) == null) {
      synchronized (JobServiceGrpc.class) {
        if ((getCancelRunMethod = JobServiceGrpc.getCancelRunMethod) == null) {
          JobServiceGrpc.getCancelRunMethod = getCancelRunMethod =
              io.grpc.MethodDescriptor.<dev.jobmesh.v1.CancelRunRequest, dev.jobmesh.v1.CancelRunResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "CancelRun"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.jobmesh.v1.CancelRunRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.jobmesh.v1.CancelRunResponse.getDefaultInstance()))
              .setSchemaDescriptor(new JobServiceMethodDescriptorSupplier("CancelRun"))
              .build();
        }
      }
    }
    return getCancelRunMethod;
  }

  private static volatile io.grpc.MethodDescriptor<dev.jobmesh.v1.ReplayRunRequest,
      dev.jobmesh.v1.ReplayRunResponse> getReplayRunMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "ReplayRun",
      requestType = dev.jobmesh.v1.ReplayRunRequest.class,
      responseType = dev.jobmesh.v1.ReplayRunResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<dev.jobmesh.v1.ReplayRunRequest,
      dev.jobmesh.v1.ReplayRunResponse> getReplayRunMethod() {
    io.grpc.MethodDescriptor<dev.jobmesh.v1.ReplayRunRequest, dev.jobmesh.v1.ReplayRunResponse> getReplayRunMethod;
    if ((getReplayRunMethod = JobServiceGrpc.getReplayRunMethod) == null) {
      synchronized (JobServiceGrpc.class) {
        if ((getReplayRunMethod = JobServiceGrpc.getReplayRunMethod) == null) {
          JobServiceGrpc.getReplayRunMethod = getReplayRunMethod =
              io.grpc.MethodDescriptor.<dev.jobmesh.v1.ReplayRunRequest, dev.jobmesh.v1.ReplayRunResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "ReplayRun"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.jobmesh.v1.ReplayRunRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.jobmesh.v1.ReplayRunResponse.getDefaultInstance()))
              .setSchemaDescriptor(new JobServiceMethodDescriptorSupplier("ReplayRun"))
              .build();
        }
      }
    }
    return getReplayRunMethod;
  }

  private static volatile io.grpc.MethodDescriptor<dev.jobmesh.v1.BackfillJobRequest,
      dev.jobmesh.v1.BackfillJobResponse> getBackfillJobMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "BackfillJob",
      requestType = dev.jobmesh.v1.BackfillJobRequest.class,
      responseType = dev.jobmesh.v1.BackfillJobResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<dev.jobmesh.v1.BackfillJobRequest,
      dev.jobmesh.v1.BackfillJobResponse> getBackfillJobMethod() {
    io.grpc.MethodDescriptor<dev.jobmesh.v1.BackfillJobRequest, dev.jobmesh.v1.BackfillJobResponse> getBackfillJobMethod;
    if ((getBackfillJobMethod = JobServiceGrpc.getBackfillJobMethod) == null) {
      synchronized (JobServiceGrpc.class) {
        if ((getBackfillJobMethod = JobServiceGrpc.getBackfillJobMethod) == null) {
          JobServiceGrpc.getBackfillJobMethod = getBackfillJobMethod =
              io.grpc.MethodDescriptor.<dev.jobmesh.v1.BackfillJobRequest, dev.jobmesh.v1.BackfillJobResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "BackfillJob"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.jobmesh.v1.BackfillJobRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.jobmesh.v1.BackfillJobResponse.getDefaultInstance()))
              .setSchemaDescriptor(new JobServiceMethodDescriptorSupplier("BackfillJob"))
              .build();
        }
      }
    }
    return getBackfillJobMethod;
  }

  private static volatile io.grpc.MethodDescriptor<dev.jobmesh.v1.BulkCancelRunsRequest,
      dev.jobmesh.v1.BulkCancelRunsResponse> getBulkCancelRunsMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "BulkCancelRuns",
      requestType = dev.jobmesh.v1.BulkCancelRunsRequest.class,
      responseType = dev.jobmesh.v1.BulkCancelRunsResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<dev.jobmesh.v1.BulkCancelRunsRequest,
      dev.jobmesh.v1.BulkCancelRunsResponse> getBulkCancelRunsMethod() {
    io.grpc.MethodDescriptor<dev.jobmesh.v1.BulkCancelRunsRequest, dev.jobmesh.v1.BulkCancelRunsResponse> getBulkCancelRunsMethod;
    if ((getBulkCancelRunsMethod = JobServiceGrpc.getBulkCancelRunsMethod) == null) {
      synchronized (JobServiceGrpc.class) {
        if ((getBulkCancelRunsMethod = JobServiceGrpc.getBulkCancelRunsMethod) == null) {
          JobServiceGrpc.getBulkCancelRunsMethod = getBulkCancelRunsMethod =
              io.grpc.MethodDescriptor.<dev.jobmesh.v1.BulkCancelRunsRequest, dev.jobmesh.v1.BulkCancelRunsResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "BulkCancelRuns"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.jobmesh.v1.BulkCancelRunsRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.jobmesh.v1.BulkCancelRunsResponse.getDefaultInstance()))
              .setSchemaDescriptor(new JobServiceMethodDescriptorSupplier("BulkCancelRuns"))
              .build();
        }
      }
    }
    return getBulkCancelRunsMethod;
  }

  private static volatile io.grpc.MethodDescriptor<dev.jobmesh.v1.BulkReplayRunsRequest,
      dev.jobmesh.v1.BulkReplayRunsResponse> getBulkReplayRunsMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "BulkReplayRuns",
      requestType = dev.jobmesh.v1.BulkReplayRunsRequest.class,
      responseType = dev.jobmesh.v1.BulkReplayRunsResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<dev.jobmesh.v1.BulkReplayRunsRequest,
      dev.jobmesh.v1.BulkReplayRunsResponse> getBulkReplayRunsMethod() {
    io.grpc.MethodDescriptor<dev.jobmesh.v1.BulkReplayRunsRequest, dev.jobmesh.v1.BulkReplayRunsResponse> getBulkReplayRunsMethod;
    if ((getBulkReplayRunsMethod = JobServiceGrpc.getBulkReplayRunsMethod) == null) {
      synchronized (JobServiceGrpc.class) {
        if ((getBulkReplayRunsMethod = JobServiceGrpc.getBulkReplayRunsMethod) == null) {
          JobServiceGrpc.getBulkReplayRunsMethod = getBulkReplayRunsMethod =
              io.grpc.MethodDescriptor.<dev.jobmesh.v1.BulkReplayRunsRequest, dev.jobmesh.v1.BulkReplayRunsResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "BulkReplayRuns"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.jobmesh.v1.BulkReplayRunsRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.jobmesh.v1.BulkReplayRunsResponse.getDefaultInstance()))
              .setSchemaDescriptor(new JobServiceMethodDescriptorSupplier("BulkReplayRuns"))
              .build();
        }
      }
    }
    return getBulkReplayRunsMethod;
  }

  private static volatile io.grpc.MethodDescriptor<dev.jobmesh.v1.BulkPauseJobsRequest,
      dev.jobmesh.v1.BulkPauseJobsResponse> getBulkPauseJobsMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "BulkPauseJobs",
      requestType = dev.jobmesh.v1.BulkPauseJobsRequest.class,
      responseType = dev.jobmesh.v1.BulkPauseJobsResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<dev.jobmesh.v1.BulkPauseJobsRequest,
      dev.jobmesh.v1.BulkPauseJobsResponse> getBulkPauseJobsMethod() {
    io.grpc.MethodDescriptor<dev.jobmesh.v1.BulkPauseJobsRequest, dev.jobmesh.v1.BulkPauseJobsResponse> getBulkPauseJobsMethod;
    if ((getBulkPauseJobsMethod = JobServiceGrpc.getBulkPauseJobsMethod) == null) {
      synchronized (JobServiceGrpc.class) {
        if ((getBulkPauseJobsMethod = JobServiceGrpc.getBulkPauseJobsMethod) == null) {
          JobServiceGrpc.getBulkPauseJobsMethod = getBulkPauseJobsMethod =
              io.grpc.MethodDescriptor.<dev.jobmesh.v1.BulkPauseJobsRequest, dev.jobmesh.v1.BulkPauseJobsResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "BulkPauseJobs"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.jobmesh.v1.BulkPauseJobsRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.jobmesh.v1.BulkPauseJobsResponse.getDefaultInstance()))
              .setSchemaDescriptor(new JobServiceMethodDescriptorSupplier("BulkPauseJobs"))
              .build();
        }
      }
    }
    return getBulkPauseJobsMethod;
  }

  private static volatile io.grpc.MethodDescriptor<dev.jobmesh.v1.BulkResumeJobsRequest,
      dev.jobmesh.v1.BulkResumeJobsResponse> getBulkResumeJobsMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "BulkResumeJobs",
      requestType = dev.jobmesh.v1.BulkResumeJobsRequest.class,
      responseType = dev.jobmesh.v1.BulkResumeJobsResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<dev.jobmesh.v1.BulkResumeJobsRequest,
      dev.jobmesh.v1.BulkResumeJobsResponse> getBulkResumeJobsMethod() {
    io.grpc.MethodDescriptor<dev.jobmesh.v1.BulkResumeJobsRequest, dev.jobmesh.v1.BulkResumeJobsResponse> getBulkResumeJobsMethod;
    if ((getBulkResumeJobsMethod = JobServiceGrpc.getBulkResumeJobsMethod) == null) {
      synchronized (JobServiceGrpc.class) {
        if ((getBulkResumeJobsMethod = JobServiceGrpc.getBulkResumeJobsMethod) == null) {
          JobServiceGrpc.getBulkResumeJobsMethod = getBulkResumeJobsMethod =
              io.grpc.MethodDescriptor.<dev.jobmesh.v1.BulkResumeJobsRequest, dev.jobmesh.v1.BulkResumeJobsResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "BulkResumeJobs"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.jobmesh.v1.BulkResumeJobsRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.jobmesh.v1.BulkResumeJobsResponse.getDefaultInstance()))
              .setSchemaDescriptor(new JobServiceMethodDescriptorSupplier("BulkResumeJobs"))
              .build();
        }
      }
    }
    return getBulkResumeJobsMethod;
  }

  /**
   * Creates a new async stub that supports all call types for the service
   */
  public static JobServiceStub newStub(io.grpc.Channel channel) {
    io.grpc.stub.AbstractStub.StubFactory<JobServiceStub> factory =
      new io.grpc.stub.AbstractStub.StubFactory<JobServiceStub>() {
        @java.lang.Override
        public JobServiceStub newStub(io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
          return new JobServiceStub(channel, callOptions);
        }
      };
    return JobServiceStub.newStub(factory, channel);
  }

  /**
   * Creates a new blocking-style stub that supports all types of calls on the service
   */
  public static JobServiceBlockingV2Stub newBlockingV2Stub(
      io.grpc.Channel channel) {
    io.grpc.stub.AbstractStub.StubFactory<JobServiceBlockingV2Stub> factory =
      new io.grpc.stub.AbstractStub.StubFactory<JobServiceBlockingV2Stub>() {
        @java.lang.Override
        public JobServiceBlockingV2Stub newStub(io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
          return new JobServiceBlockingV2Stub(channel, callOptions);
        }
      };
    return JobServiceBlockingV2Stub.newStub(factory, channel);
  }

  /**
   * Creates a new blocking-style stub that supports unary and streaming output calls on the service
   */
  public static JobServiceBlockingStub newBlockingStub(
      io.grpc.Channel channel) {
    io.grpc.stub.AbstractStub.StubFactory<JobServiceBlockingStub> factory =
      new io.grpc.stub.AbstractStub.StubFactory<JobServiceBlockingStub>() {
        @java.lang.Override
        public JobServiceBlockingStub newStub(io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
          return new JobServiceBlockingStub(channel, callOptions);
        }
      };
    return JobServiceBlockingStub.newStub(factory, channel);
  }

  /**
   * Creates a new ListenableFuture-style stub that supports unary calls on the service
   */
  public static JobServiceFutureStub newFutureStub(
      io.grpc.Channel channel) {
    io.grpc.stub.AbstractStub.StubFactory<JobServiceFutureStub> factory =
      new io.grpc.stub.AbstractStub.StubFactory<JobServiceFutureStub>() {
        @java.lang.Override
        public JobServiceFutureStub newStub(io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
          return new JobServiceFutureStub(channel, callOptions);
        }
      };
    return JobServiceFutureStub.newStub(factory, channel);
  }

  /**
   * <pre>
   * Writes: create and steer jobs and their runs.
   * Errors carry a canonical code and `google.rpc` details: `INVALID_ARGUMENT` with `BadRequest` field violations
   * for bad input, `NOT_FOUND` for a missing job or run, `ABORTED` for a stale etag, `ALREADY_EXISTS` for a taken
   * job id or a `request_id` reused with a different request, `FAILED_PRECONDITION` for a verb the resource's
   * state does not allow. Every such error carries an `ErrorInfo`: its reasons, with their codes and metadata,
   * are listed in `ErrorReason` (errors.proto).
   * </pre>
   */
  public interface AsyncService {

    /**
     * <pre>
     * Creates a job. When its first run is due now or within the threshold, the run is created and queued too.
     * </pre>
     */
    default void createJob(dev.jobmesh.v1.CreateJobRequest request,
        io.grpc.stub.StreamObserver<dev.jobmesh.v1.CreateJobResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getCreateJobMethod(), responseObserver);
    }

    /**
     * <pre>
     * Creates up to 1,000 jobs. Each item succeeds or fails on its own; `results` follow the request's order.
     * </pre>
     */
    default void batchCreateJobs(dev.jobmesh.v1.BatchCreateJobsRequest request,
        io.grpc.stub.StreamObserver<dev.jobmesh.v1.BatchCreateJobsResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getBatchCreateJobsMethod(), responseObserver);
    }

    /**
     * <pre>
     * Gets a job.
     * </pre>
     */
    default void getJob(dev.jobmesh.v1.GetJobRequest request,
        io.grpc.stub.StreamObserver<dev.jobmesh.v1.GetJobResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getGetJobMethod(), responseObserver);
    }

    /**
     * <pre>
     * Updates the fields of a job named by `update_mask`. A schedule change recomputes the next run.
     * </pre>
     */
    default void updateJob(dev.jobmesh.v1.UpdateJobRequest request,
        io.grpc.stub.StreamObserver<dev.jobmesh.v1.UpdateJobResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getUpdateJobMethod(), responseObserver);
    }

    /**
     * <pre>
     * Deletes a job: its pending and running runs are cancelled, its history is kept.
     * </pre>
     */
    default void deleteJob(dev.jobmesh.v1.DeleteJobRequest request,
        io.grpc.stub.StreamObserver<dev.jobmesh.v1.DeleteJobResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getDeleteJobMethod(), responseObserver);
    }

    /**
     * <pre>
     * Pauses a job: no new runs are produced until it is resumed; runs already queued go on.
     * </pre>
     */
    default void pauseJob(dev.jobmesh.v1.PauseJobRequest request,
        io.grpc.stub.StreamObserver<dev.jobmesh.v1.PauseJobResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getPauseJobMethod(), responseObserver);
    }

    /**
     * <pre>
     * Resumes a paused job.
     * </pre>
     */
    default void resumeJob(dev.jobmesh.v1.ResumeJobRequest request,
        io.grpc.stub.StreamObserver<dev.jobmesh.v1.ResumeJobResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getResumeJobMethod(), responseObserver);
    }

    /**
     * <pre>
     * Starts a new immediate run of an existing job, outside its schedule.
     * </pre>
     */
    default void runJobNow(dev.jobmesh.v1.RunJobNowRequest request,
        io.grpc.stub.StreamObserver<dev.jobmesh.v1.RunJobNowResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getRunJobNowMethod(), responseObserver);
    }

    /**
     * <pre>
     * Cancels a pending or running run.
     * </pre>
     */
    default void cancelRun(dev.jobmesh.v1.CancelRunRequest request,
        io.grpc.stub.StreamObserver<dev.jobmesh.v1.CancelRunResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getCancelRunMethod(), responseObserver);
    }

    /**
     * <pre>
     * Runs a failed, timed-out or dead-lettered run again, as a new run of the same job.
     * </pre>
     */
    default void replayRun(dev.jobmesh.v1.ReplayRunRequest request,
        io.grpc.stub.StreamObserver<dev.jobmesh.v1.ReplayRunResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getReplayRunMethod(), responseObserver);
    }

    /**
     * <pre>
     * Runs a cron job's occurrences over a past range again, one run per occurrence (trigger
     * `RUN_TRIGGER_BACKFILL`), paced: the runs become due one after another, `pace` apart, from now on.
     * </pre>
     */
    default void backfillJob(dev.jobmesh.v1.BackfillJobRequest request,
        io.grpc.stub.StreamObserver<dev.jobmesh.v1.BackfillJobResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getBackfillJobMethod(), responseObserver);
    }

    /**
     * <pre>
     * Cancels the pending and running runs that match a filter, as `CancelRun` cancels each, at most 1,000
     * per call: a filter that matches more is refused with `INVALID_ARGUMENT` (narrow it, then call again).
     * With `validate_only` nothing changes and the response counts the runs that would be cancelled.
     * </pre>
     */
    default void bulkCancelRuns(dev.jobmesh.v1.BulkCancelRunsRequest request,
        io.grpc.stub.StreamObserver<dev.jobmesh.v1.BulkCancelRunsResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getBulkCancelRunsMethod(), responseObserver);
    }

    /**
     * <pre>
     * Replays the failed, timed-out and dead-lettered runs that match a filter, as `ReplayRun` replays each,
     * at most 1,000 per call (as in `BulkCancelRuns`).
     * </pre>
     */
    default void bulkReplayRuns(dev.jobmesh.v1.BulkReplayRunsRequest request,
        io.grpc.stub.StreamObserver<dev.jobmesh.v1.BulkReplayRunsResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getBulkReplayRunsMethod(), responseObserver);
    }

    /**
     * <pre>
     * Pauses the active jobs that match a filter, as `PauseJob` pauses each, at most 1,000 per call.
     * </pre>
     */
    default void bulkPauseJobs(dev.jobmesh.v1.BulkPauseJobsRequest request,
        io.grpc.stub.StreamObserver<dev.jobmesh.v1.BulkPauseJobsResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getBulkPauseJobsMethod(), responseObserver);
    }

    /**
     * <pre>
     * Resumes the paused jobs that match a filter, as `ResumeJob` resumes each, at most 1,000 per call.
     * </pre>
     */
    default void bulkResumeJobs(dev.jobmesh.v1.BulkResumeJobsRequest request,
        io.grpc.stub.StreamObserver<dev.jobmesh.v1.BulkResumeJobsResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getBulkResumeJobsMethod(), responseObserver);
    }
  }

  /**
   * Base class for the server implementation of the service JobService.
   * <pre>
   * Writes: create and steer jobs and their runs.
   * Errors carry a canonical code and `google.rpc` details: `INVALID_ARGUMENT` with `BadRequest` field violations
   * for bad input, `NOT_FOUND` for a missing job or run, `ABORTED` for a stale etag, `ALREADY_EXISTS` for a taken
   * job id or a `request_id` reused with a different request, `FAILED_PRECONDITION` for a verb the resource's
   * state does not allow. Every such error carries an `ErrorInfo`: its reasons, with their codes and metadata,
   * are listed in `ErrorReason` (errors.proto).
   * </pre>
   */
  public static abstract class JobServiceImplBase
      implements io.grpc.BindableService, AsyncService {

    @java.lang.Override public final io.grpc.ServerServiceDefinition bindService() {
      return JobServiceGrpc.bindService(this);
    }
  }

  /**
   * A stub to allow clients to do asynchronous rpc calls to service JobService.
   * <pre>
   * Writes: create and steer jobs and their runs.
   * Errors carry a canonical code and `google.rpc` details: `INVALID_ARGUMENT` with `BadRequest` field violations
   * for bad input, `NOT_FOUND` for a missing job or run, `ABORTED` for a stale etag, `ALREADY_EXISTS` for a taken
   * job id or a `request_id` reused with a different request, `FAILED_PRECONDITION` for a verb the resource's
   * state does not allow. Every such error carries an `ErrorInfo`: its reasons, with their codes and metadata,
   * are listed in `ErrorReason` (errors.proto).
   * </pre>
   */
  public static final class JobServiceStub
      extends io.grpc.stub.AbstractAsyncStub<JobServiceStub> {
    private JobServiceStub(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      super(channel, callOptions);
    }

    @java.lang.Override
    protected JobServiceStub build(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      return new JobServiceStub(channel, callOptions);
    }

    /**
     * <pre>
     * Creates a job. When its first run is due now or within the threshold, the run is created and queued too.
     * </pre>
     */
    public void createJob(dev.jobmesh.v1.CreateJobRequest request,
        io.grpc.stub.StreamObserver<dev.jobmesh.v1.CreateJobResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getCreateJobMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Creates up to 1,000 jobs. Each item succeeds or fails on its own; `results` follow the request's order.
     * </pre>
     */
    public void batchCreateJobs(dev.jobmesh.v1.BatchCreateJobsRequest request,
        io.grpc.stub.StreamObserver<dev.jobmesh.v1.BatchCreateJobsResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getBatchCreateJobsMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Gets a job.
     * </pre>
     */
    public void getJob(dev.jobmesh.v1.GetJobRequest request,
        io.grpc.stub.StreamObserver<dev.jobmesh.v1.GetJobResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getGetJobMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Updates the fields of a job named by `update_mask`. A schedule change recomputes the next run.
     * </pre>
     */
    public void updateJob(dev.jobmesh.v1.UpdateJobRequest request,
        io.grpc.stub.StreamObserver<dev.jobmesh.v1.UpdateJobResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getUpdateJobMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Deletes a job: its pending and running runs are cancelled, its history is kept.
     * </pre>
     */
    public void deleteJob(dev.jobmesh.v1.DeleteJobRequest request,
        io.grpc.stub.StreamObserver<dev.jobmesh.v1.DeleteJobResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getDeleteJobMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Pauses a job: no new runs are produced until it is resumed; runs already queued go on.
     * </pre>
     */
    public void pauseJob(dev.jobmesh.v1.PauseJobRequest request,
        io.grpc.stub.StreamObserver<dev.jobmesh.v1.PauseJobResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getPauseJobMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Resumes a paused job.
     * </pre>
     */
    public void resumeJob(dev.jobmesh.v1.ResumeJobRequest request,
        io.grpc.stub.StreamObserver<dev.jobmesh.v1.ResumeJobResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getResumeJobMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Starts a new immediate run of an existing job, outside its schedule.
     * </pre>
     */
    public void runJobNow(dev.jobmesh.v1.RunJobNowRequest request,
        io.grpc.stub.StreamObserver<dev.jobmesh.v1.RunJobNowResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getRunJobNowMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Cancels a pending or running run.
     * </pre>
     */
    public void cancelRun(dev.jobmesh.v1.CancelRunRequest request,
        io.grpc.stub.StreamObserver<dev.jobmesh.v1.CancelRunResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getCancelRunMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Runs a failed, timed-out or dead-lettered run again, as a new run of the same job.
     * </pre>
     */
    public void replayRun(dev.jobmesh.v1.ReplayRunRequest request,
        io.grpc.stub.StreamObserver<dev.jobmesh.v1.ReplayRunResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getReplayRunMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Runs a cron job's occurrences over a past range again, one run per occurrence (trigger
     * `RUN_TRIGGER_BACKFILL`), paced: the runs become due one after another, `pace` apart, from now on.
     * </pre>
     */
    public void backfillJob(dev.jobmesh.v1.BackfillJobRequest request,
        io.grpc.stub.StreamObserver<dev.jobmesh.v1.BackfillJobResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getBackfillJobMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Cancels the pending and running runs that match a filter, as `CancelRun` cancels each, at most 1,000
     * per call: a filter that matches more is refused with `INVALID_ARGUMENT` (narrow it, then call again).
     * With `validate_only` nothing changes and the response counts the runs that would be cancelled.
     * </pre>
     */
    public void bulkCancelRuns(dev.jobmesh.v1.BulkCancelRunsRequest request,
        io.grpc.stub.StreamObserver<dev.jobmesh.v1.BulkCancelRunsResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getBulkCancelRunsMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Replays the failed, timed-out and dead-lettered runs that match a filter, as `ReplayRun` replays each,
     * at most 1,000 per call (as in `BulkCancelRuns`).
     * </pre>
     */
    public void bulkReplayRuns(dev.jobmesh.v1.BulkReplayRunsRequest request,
        io.grpc.stub.StreamObserver<dev.jobmesh.v1.BulkReplayRunsResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getBulkReplayRunsMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Pauses the active jobs that match a filter, as `PauseJob` pauses each, at most 1,000 per call.
     * </pre>
     */
    public void bulkPauseJobs(dev.jobmesh.v1.BulkPauseJobsRequest request,
        io.grpc.stub.StreamObserver<dev.jobmesh.v1.BulkPauseJobsResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getBulkPauseJobsMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Resumes the paused jobs that match a filter, as `ResumeJob` resumes each, at most 1,000 per call.
     * </pre>
     */
    public void bulkResumeJobs(dev.jobmesh.v1.BulkResumeJobsRequest request,
        io.grpc.stub.StreamObserver<dev.jobmesh.v1.BulkResumeJobsResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getBulkResumeJobsMethod(), getCallOptions()), request, responseObserver);
    }
  }

  /**
   * A stub to allow clients to do synchronous rpc calls to service JobService.
   * <pre>
   * Writes: create and steer jobs and their runs.
   * Errors carry a canonical code and `google.rpc` details: `INVALID_ARGUMENT` with `BadRequest` field violations
   * for bad input, `NOT_FOUND` for a missing job or run, `ABORTED` for a stale etag, `ALREADY_EXISTS` for a taken
   * job id or a `request_id` reused with a different request, `FAILED_PRECONDITION` for a verb the resource's
   * state does not allow. Every such error carries an `ErrorInfo`: its reasons, with their codes and metadata,
   * are listed in `ErrorReason` (errors.proto).
   * </pre>
   */
  public static final class JobServiceBlockingV2Stub
      extends io.grpc.stub.AbstractBlockingStub<JobServiceBlockingV2Stub> {
    private JobServiceBlockingV2Stub(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      super(channel, callOptions);
    }

    @java.lang.Override
    protected JobServiceBlockingV2Stub build(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      return new JobServiceBlockingV2Stub(channel, callOptions);
    }

    /**
     * <pre>
     * Creates a job. When its first run is due now or within the threshold, the run is created and queued too.
     * </pre>
     */
    public dev.jobmesh.v1.CreateJobResponse createJob(dev.jobmesh.v1.CreateJobRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getCreateJobMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Creates up to 1,000 jobs. Each item succeeds or fails on its own; `results` follow the request's order.
     * </pre>
     */
    public dev.jobmesh.v1.BatchCreateJobsResponse batchCreateJobs(dev.jobmesh.v1.BatchCreateJobsRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getBatchCreateJobsMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Gets a job.
     * </pre>
     */
    public dev.jobmesh.v1.GetJobResponse getJob(dev.jobmesh.v1.GetJobRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getGetJobMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Updates the fields of a job named by `update_mask`. A schedule change recomputes the next run.
     * </pre>
     */
    public dev.jobmesh.v1.UpdateJobResponse updateJob(dev.jobmesh.v1.UpdateJobRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getUpdateJobMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Deletes a job: its pending and running runs are cancelled, its history is kept.
     * </pre>
     */
    public dev.jobmesh.v1.DeleteJobResponse deleteJob(dev.jobmesh.v1.DeleteJobRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getDeleteJobMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Pauses a job: no new runs are produced until it is resumed; runs already queued go on.
     * </pre>
     */
    public dev.jobmesh.v1.PauseJobResponse pauseJob(dev.jobmesh.v1.PauseJobRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getPauseJobMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Resumes a paused job.
     * </pre>
     */
    public dev.jobmesh.v1.ResumeJobResponse resumeJob(dev.jobmesh.v1.ResumeJobRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getResumeJobMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Starts a new immediate run of an existing job, outside its schedule.
     * </pre>
     */
    public dev.jobmesh.v1.RunJobNowResponse runJobNow(dev.jobmesh.v1.RunJobNowRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getRunJobNowMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Cancels a pending or running run.
     * </pre>
     */
    public dev.jobmesh.v1.CancelRunResponse cancelRun(dev.jobmesh.v1.CancelRunRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getCancelRunMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Runs a failed, timed-out or dead-lettered run again, as a new run of the same job.
     * </pre>
     */
    public dev.jobmesh.v1.ReplayRunResponse replayRun(dev.jobmesh.v1.ReplayRunRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getReplayRunMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Runs a cron job's occurrences over a past range again, one run per occurrence (trigger
     * `RUN_TRIGGER_BACKFILL`), paced: the runs become due one after another, `pace` apart, from now on.
     * </pre>
     */
    public dev.jobmesh.v1.BackfillJobResponse backfillJob(dev.jobmesh.v1.BackfillJobRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getBackfillJobMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Cancels the pending and running runs that match a filter, as `CancelRun` cancels each, at most 1,000
     * per call: a filter that matches more is refused with `INVALID_ARGUMENT` (narrow it, then call again).
     * With `validate_only` nothing changes and the response counts the runs that would be cancelled.
     * </pre>
     */
    public dev.jobmesh.v1.BulkCancelRunsResponse bulkCancelRuns(dev.jobmesh.v1.BulkCancelRunsRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getBulkCancelRunsMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Replays the failed, timed-out and dead-lettered runs that match a filter, as `ReplayRun` replays each,
     * at most 1,000 per call (as in `BulkCancelRuns`).
     * </pre>
     */
    public dev.jobmesh.v1.BulkReplayRunsResponse bulkReplayRuns(dev.jobmesh.v1.BulkReplayRunsRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getBulkReplayRunsMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Pauses the active jobs that match a filter, as `PauseJob` pauses each, at most 1,000 per call.
     * </pre>
     */
    public dev.jobmesh.v1.BulkPauseJobsResponse bulkPauseJobs(dev.jobmesh.v1.BulkPauseJobsRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getBulkPauseJobsMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Resumes the paused jobs that match a filter, as `ResumeJob` resumes each, at most 1,000 per call.
     * </pre>
     */
    public dev.jobmesh.v1.BulkResumeJobsResponse bulkResumeJobs(dev.jobmesh.v1.BulkResumeJobsRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getBulkResumeJobsMethod(), getCallOptions(), request);
    }
  }

  /**
   * A stub to allow clients to do limited synchronous rpc calls to service JobService.
   * <pre>
   * Writes: create and steer jobs and their runs.
   * Errors carry a canonical code and `google.rpc` details: `INVALID_ARGUMENT` with `BadRequest` field violations
   * for bad input, `NOT_FOUND` for a missing job or run, `ABORTED` for a stale etag, `ALREADY_EXISTS` for a taken
   * job id or a `request_id` reused with a different request, `FAILED_PRECONDITION` for a verb the resource's
   * state does not allow. Every such error carries an `ErrorInfo`: its reasons, with their codes and metadata,
   * are listed in `ErrorReason` (errors.proto).
   * </pre>
   */
  public static final class JobServiceBlockingStub
      extends io.grpc.stub.AbstractBlockingStub<JobServiceBlockingStub> {
    private JobServiceBlockingStub(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      super(channel, callOptions);
    }

    @java.lang.Override
    protected JobServiceBlockingStub build(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      return new JobServiceBlockingStub(channel, callOptions);
    }

    /**
     * <pre>
     * Creates a job. When its first run is due now or within the threshold, the run is created and queued too.
     * </pre>
     */
    public dev.jobmesh.v1.CreateJobResponse createJob(dev.jobmesh.v1.CreateJobRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getCreateJobMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Creates up to 1,000 jobs. Each item succeeds or fails on its own; `results` follow the request's order.
     * </pre>
     */
    public dev.jobmesh.v1.BatchCreateJobsResponse batchCreateJobs(dev.jobmesh.v1.BatchCreateJobsRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getBatchCreateJobsMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Gets a job.
     * </pre>
     */
    public dev.jobmesh.v1.GetJobResponse getJob(dev.jobmesh.v1.GetJobRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getGetJobMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Updates the fields of a job named by `update_mask`. A schedule change recomputes the next run.
     * </pre>
     */
    public dev.jobmesh.v1.UpdateJobResponse updateJob(dev.jobmesh.v1.UpdateJobRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getUpdateJobMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Deletes a job: its pending and running runs are cancelled, its history is kept.
     * </pre>
     */
    public dev.jobmesh.v1.DeleteJobResponse deleteJob(dev.jobmesh.v1.DeleteJobRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getDeleteJobMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Pauses a job: no new runs are produced until it is resumed; runs already queued go on.
     * </pre>
     */
    public dev.jobmesh.v1.PauseJobResponse pauseJob(dev.jobmesh.v1.PauseJobRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getPauseJobMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Resumes a paused job.
     * </pre>
     */
    public dev.jobmesh.v1.ResumeJobResponse resumeJob(dev.jobmesh.v1.ResumeJobRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getResumeJobMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Starts a new immediate run of an existing job, outside its schedule.
     * </pre>
     */
    public dev.jobmesh.v1.RunJobNowResponse runJobNow(dev.jobmesh.v1.RunJobNowRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getRunJobNowMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Cancels a pending or running run.
     * </pre>
     */
    public dev.jobmesh.v1.CancelRunResponse cancelRun(dev.jobmesh.v1.CancelRunRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getCancelRunMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Runs a failed, timed-out or dead-lettered run again, as a new run of the same job.
     * </pre>
     */
    public dev.jobmesh.v1.ReplayRunResponse replayRun(dev.jobmesh.v1.ReplayRunRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getReplayRunMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Runs a cron job's occurrences over a past range again, one run per occurrence (trigger
     * `RUN_TRIGGER_BACKFILL`), paced: the runs become due one after another, `pace` apart, from now on.
     * </pre>
     */
    public dev.jobmesh.v1.BackfillJobResponse backfillJob(dev.jobmesh.v1.BackfillJobRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getBackfillJobMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Cancels the pending and running runs that match a filter, as `CancelRun` cancels each, at most 1,000
     * per call: a filter that matches more is refused with `INVALID_ARGUMENT` (narrow it, then call again).
     * With `validate_only` nothing changes and the response counts the runs that would be cancelled.
     * </pre>
     */
    public dev.jobmesh.v1.BulkCancelRunsResponse bulkCancelRuns(dev.jobmesh.v1.BulkCancelRunsRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getBulkCancelRunsMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Replays the failed, timed-out and dead-lettered runs that match a filter, as `ReplayRun` replays each,
     * at most 1,000 per call (as in `BulkCancelRuns`).
     * </pre>
     */
    public dev.jobmesh.v1.BulkReplayRunsResponse bulkReplayRuns(dev.jobmesh.v1.BulkReplayRunsRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getBulkReplayRunsMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Pauses the active jobs that match a filter, as `PauseJob` pauses each, at most 1,000 per call.
     * </pre>
     */
    public dev.jobmesh.v1.BulkPauseJobsResponse bulkPauseJobs(dev.jobmesh.v1.BulkPauseJobsRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getBulkPauseJobsMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Resumes the paused jobs that match a filter, as `ResumeJob` resumes each, at most 1,000 per call.
     * </pre>
     */
    public dev.jobmesh.v1.BulkResumeJobsResponse bulkResumeJobs(dev.jobmesh.v1.BulkResumeJobsRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getBulkResumeJobsMethod(), getCallOptions(), request);
    }
  }

  /**
   * A stub to allow clients to do ListenableFuture-style rpc calls to service JobService.
   * <pre>
   * Writes: create and steer jobs and their runs.
   * Errors carry a canonical code and `google.rpc` details: `INVALID_ARGUMENT` with `BadRequest` field violations
   * for bad input, `NOT_FOUND` for a missing job or run, `ABORTED` for a stale etag, `ALREADY_EXISTS` for a taken
   * job id or a `request_id` reused with a different request, `FAILED_PRECONDITION` for a verb the resource's
   * state does not allow. Every such error carries an `ErrorInfo`: its reasons, with their codes and metadata,
   * are listed in `ErrorReason` (errors.proto).
   * </pre>
   */
  public static final class JobServiceFutureStub
      extends io.grpc.stub.AbstractFutureStub<JobServiceFutureStub> {
    private JobServiceFutureStub(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      super(channel, callOptions);
    }

    @java.lang.Override
    protected JobServiceFutureStub build(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      return new JobServiceFutureStub(channel, callOptions);
    }

    /**
     * <pre>
     * Creates a job. When its first run is due now or within the threshold, the run is created and queued too.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<dev.jobmesh.v1.CreateJobResponse> createJob(
        dev.jobmesh.v1.CreateJobRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getCreateJobMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * Creates up to 1,000 jobs. Each item succeeds or fails on its own; `results` follow the request's order.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<dev.jobmesh.v1.BatchCreateJobsResponse> batchCreateJobs(
        dev.jobmesh.v1.BatchCreateJobsRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getBatchCreateJobsMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * Gets a job.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<dev.jobmesh.v1.GetJobResponse> getJob(
        dev.jobmesh.v1.GetJobRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getGetJobMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * Updates the fields of a job named by `update_mask`. A schedule change recomputes the next run.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<dev.jobmesh.v1.UpdateJobResponse> updateJob(
        dev.jobmesh.v1.UpdateJobRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getUpdateJobMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * Deletes a job: its pending and running runs are cancelled, its history is kept.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<dev.jobmesh.v1.DeleteJobResponse> deleteJob(
        dev.jobmesh.v1.DeleteJobRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getDeleteJobMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * Pauses a job: no new runs are produced until it is resumed; runs already queued go on.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<dev.jobmesh.v1.PauseJobResponse> pauseJob(
        dev.jobmesh.v1.PauseJobRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getPauseJobMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * Resumes a paused job.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<dev.jobmesh.v1.ResumeJobResponse> resumeJob(
        dev.jobmesh.v1.ResumeJobRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getResumeJobMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * Starts a new immediate run of an existing job, outside its schedule.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<dev.jobmesh.v1.RunJobNowResponse> runJobNow(
        dev.jobmesh.v1.RunJobNowRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getRunJobNowMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * Cancels a pending or running run.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<dev.jobmesh.v1.CancelRunResponse> cancelRun(
        dev.jobmesh.v1.CancelRunRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getCancelRunMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * Runs a failed, timed-out or dead-lettered run again, as a new run of the same job.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<dev.jobmesh.v1.ReplayRunResponse> replayRun(
        dev.jobmesh.v1.ReplayRunRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getReplayRunMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * Runs a cron job's occurrences over a past range again, one run per occurrence (trigger
     * `RUN_TRIGGER_BACKFILL`), paced: the runs become due one after another, `pace` apart, from now on.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<dev.jobmesh.v1.BackfillJobResponse> backfillJob(
        dev.jobmesh.v1.BackfillJobRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getBackfillJobMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * Cancels the pending and running runs that match a filter, as `CancelRun` cancels each, at most 1,000
     * per call: a filter that matches more is refused with `INVALID_ARGUMENT` (narrow it, then call again).
     * With `validate_only` nothing changes and the response counts the runs that would be cancelled.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<dev.jobmesh.v1.BulkCancelRunsResponse> bulkCancelRuns(
        dev.jobmesh.v1.BulkCancelRunsRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getBulkCancelRunsMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * Replays the failed, timed-out and dead-lettered runs that match a filter, as `ReplayRun` replays each,
     * at most 1,000 per call (as in `BulkCancelRuns`).
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<dev.jobmesh.v1.BulkReplayRunsResponse> bulkReplayRuns(
        dev.jobmesh.v1.BulkReplayRunsRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getBulkReplayRunsMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * Pauses the active jobs that match a filter, as `PauseJob` pauses each, at most 1,000 per call.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<dev.jobmesh.v1.BulkPauseJobsResponse> bulkPauseJobs(
        dev.jobmesh.v1.BulkPauseJobsRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getBulkPauseJobsMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * Resumes the paused jobs that match a filter, as `ResumeJob` resumes each, at most 1,000 per call.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<dev.jobmesh.v1.BulkResumeJobsResponse> bulkResumeJobs(
        dev.jobmesh.v1.BulkResumeJobsRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getBulkResumeJobsMethod(), getCallOptions()), request);
    }
  }

  private static final int METHODID_CREATE_JOB = 0;
  private static final int METHODID_BATCH_CREATE_JOBS = 1;
  private static final int METHODID_GET_JOB = 2;
  private static final int METHODID_UPDATE_JOB = 3;
  private static final int METHODID_DELETE_JOB = 4;
  private static final int METHODID_PAUSE_JOB = 5;
  private static final int METHODID_RESUME_JOB = 6;
  private static final int METHODID_RUN_JOB_NOW = 7;
  private static final int METHODID_CANCEL_RUN = 8;
  private static final int METHODID_REPLAY_RUN = 9;
  private static final int METHODID_BACKFILL_JOB = 10;
  private static final int METHODID_BULK_CANCEL_RUNS = 11;
  private static final int METHODID_BULK_REPLAY_RUNS = 12;
  private static final int METHODID_BULK_PAUSE_JOBS = 13;
  private static final int METHODID_BULK_RESUME_JOBS = 14;

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
        case METHODID_CREATE_JOB:
          serviceImpl.createJob((dev.jobmesh.v1.CreateJobRequest) request,
              (io.grpc.stub.StreamObserver<dev.jobmesh.v1.CreateJobResponse>) responseObserver);
          break;
        case METHODID_BATCH_CREATE_JOBS:
          serviceImpl.batchCreateJobs((dev.jobmesh.v1.BatchCreateJobsRequest) request,
              (io.grpc.stub.StreamObserver<dev.jobmesh.v1.BatchCreateJobsResponse>) responseObserver);
          break;
        case METHODID_GET_JOB:
          serviceImpl.getJob((dev.jobmesh.v1.GetJobRequest) request,
              (io.grpc.stub.StreamObserver<dev.jobmesh.v1.GetJobResponse>) responseObserver);
          break;
        case METHODID_UPDATE_JOB:
          serviceImpl.updateJob((dev.jobmesh.v1.UpdateJobRequest) request,
              (io.grpc.stub.StreamObserver<dev.jobmesh.v1.UpdateJobResponse>) responseObserver);
          break;
        case METHODID_DELETE_JOB:
          serviceImpl.deleteJob((dev.jobmesh.v1.DeleteJobRequest) request,
              (io.grpc.stub.StreamObserver<dev.jobmesh.v1.DeleteJobResponse>) responseObserver);
          break;
        case METHODID_PAUSE_JOB:
          serviceImpl.pauseJob((dev.jobmesh.v1.PauseJobRequest) request,
              (io.grpc.stub.StreamObserver<dev.jobmesh.v1.PauseJobResponse>) responseObserver);
          break;
        case METHODID_RESUME_JOB:
          serviceImpl.resumeJob((dev.jobmesh.v1.ResumeJobRequest) request,
              (io.grpc.stub.StreamObserver<dev.jobmesh.v1.ResumeJobResponse>) responseObserver);
          break;
        case METHODID_RUN_JOB_NOW:
          serviceImpl.runJobNow((dev.jobmesh.v1.RunJobNowRequest) request,
              (io.grpc.stub.StreamObserver<dev.jobmesh.v1.RunJobNowResponse>) responseObserver);
          break;
        case METHODID_CANCEL_RUN:
          serviceImpl.cancelRun((dev.jobmesh.v1.CancelRunRequest) request,
              (io.grpc.stub.StreamObserver<dev.jobmesh.v1.CancelRunResponse>) responseObserver);
          break;
        case METHODID_REPLAY_RUN:
          serviceImpl.replayRun((dev.jobmesh.v1.ReplayRunRequest) request,
              (io.grpc.stub.StreamObserver<dev.jobmesh.v1.ReplayRunResponse>) responseObserver);
          break;
        case METHODID_BACKFILL_JOB:
          serviceImpl.backfillJob((dev.jobmesh.v1.BackfillJobRequest) request,
              (io.grpc.stub.StreamObserver<dev.jobmesh.v1.BackfillJobResponse>) responseObserver);
          break;
        case METHODID_BULK_CANCEL_RUNS:
          serviceImpl.bulkCancelRuns((dev.jobmesh.v1.BulkCancelRunsRequest) request,
              (io.grpc.stub.StreamObserver<dev.jobmesh.v1.BulkCancelRunsResponse>) responseObserver);
          break;
        case METHODID_BULK_REPLAY_RUNS:
          serviceImpl.bulkReplayRuns((dev.jobmesh.v1.BulkReplayRunsRequest) request,
              (io.grpc.stub.StreamObserver<dev.jobmesh.v1.BulkReplayRunsResponse>) responseObserver);
          break;
        case METHODID_BULK_PAUSE_JOBS:
          serviceImpl.bulkPauseJobs((dev.jobmesh.v1.BulkPauseJobsRequest) request,
              (io.grpc.stub.StreamObserver<dev.jobmesh.v1.BulkPauseJobsResponse>) responseObserver);
          break;
        case METHODID_BULK_RESUME_JOBS:
          serviceImpl.bulkResumeJobs((dev.jobmesh.v1.BulkResumeJobsRequest) request,
              (io.grpc.stub.StreamObserver<dev.jobmesh.v1.BulkResumeJobsResponse>) responseObserver);
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
          getCreateJobMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              dev.jobmesh.v1.CreateJobRequest,
              dev.jobmesh.v1.CreateJobResponse>(
                service, METHODID_CREATE_JOB)))
        .addMethod(
          getBatchCreateJobsMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              dev.jobmesh.v1.BatchCreateJobsRequest,
              dev.jobmesh.v1.BatchCreateJobsResponse>(
                service, METHODID_BATCH_CREATE_JOBS)))
        .addMethod(
          getGetJobMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              dev.jobmesh.v1.GetJobRequest,
              dev.jobmesh.v1.GetJobResponse>(
                service, METHODID_GET_JOB)))
        .addMethod(
          getUpdateJobMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              dev.jobmesh.v1.UpdateJobRequest,
              dev.jobmesh.v1.UpdateJobResponse>(
                service, METHODID_UPDATE_JOB)))
        .addMethod(
          getDeleteJobMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              dev.jobmesh.v1.DeleteJobRequest,
              dev.jobmesh.v1.DeleteJobResponse>(
                service, METHODID_DELETE_JOB)))
        .addMethod(
          getPauseJobMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              dev.jobmesh.v1.PauseJobRequest,
              dev.jobmesh.v1.PauseJobResponse>(
                service, METHODID_PAUSE_JOB)))
        .addMethod(
          getResumeJobMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              dev.jobmesh.v1.ResumeJobRequest,
              dev.jobmesh.v1.ResumeJobResponse>(
                service, METHODID_RESUME_JOB)))
        .addMethod(
          getRunJobNowMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              dev.jobmesh.v1.RunJobNowRequest,
              dev.jobmesh.v1.RunJobNowResponse>(
                service, METHODID_RUN_JOB_NOW)))
        .addMethod(
          getCancelRunMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              dev.jobmesh.v1.CancelRunRequest,
              dev.jobmesh.v1.CancelRunResponse>(
                service, METHODID_CANCEL_RUN)))
        .addMethod(
          getReplayRunMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              dev.jobmesh.v1.ReplayRunRequest,
              dev.jobmesh.v1.ReplayRunResponse>(
                service, METHODID_REPLAY_RUN)))
        .addMethod(
          getBackfillJobMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              dev.jobmesh.v1.BackfillJobRequest,
              dev.jobmesh.v1.BackfillJobResponse>(
                service, METHODID_BACKFILL_JOB)))
        .addMethod(
          getBulkCancelRunsMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              dev.jobmesh.v1.BulkCancelRunsRequest,
              dev.jobmesh.v1.BulkCancelRunsResponse>(
                service, METHODID_BULK_CANCEL_RUNS)))
        .addMethod(
          getBulkReplayRunsMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              dev.jobmesh.v1.BulkReplayRunsRequest,
              dev.jobmesh.v1.BulkReplayRunsResponse>(
                service, METHODID_BULK_REPLAY_RUNS)))
        .addMethod(
          getBulkPauseJobsMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              dev.jobmesh.v1.BulkPauseJobsRequest,
              dev.jobmesh.v1.BulkPauseJobsResponse>(
                service, METHODID_BULK_PAUSE_JOBS)))
        .addMethod(
          getBulkResumeJobsMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              dev.jobmesh.v1.BulkResumeJobsRequest,
              dev.jobmesh.v1.BulkResumeJobsResponse>(
                service, METHODID_BULK_RESUME_JOBS)))
        .build();
  }

  private static abstract class JobServiceBaseDescriptorSupplier
      implements io.grpc.protobuf.ProtoFileDescriptorSupplier, io.grpc.protobuf.ProtoServiceDescriptorSupplier {
    JobServiceBaseDescriptorSupplier() {}

    @java.lang.Override
    public com.google.protobuf.Descriptors.FileDescriptor getFileDescriptor() {
      return dev.jobmesh.v1.JobServiceProto.getDescriptor();
    }

    @java.lang.Override
    public com.google.protobuf.Descriptors.ServiceDescriptor getServiceDescriptor() {
      return getFileDescriptor().findServiceByName("JobService");
    }
  }

  private static final class JobServiceFileDescriptorSupplier
      extends JobServiceBaseDescriptorSupplier {
    JobServiceFileDescriptorSupplier() {}
  }

  private static final class JobServiceMethodDescriptorSupplier
      extends JobServiceBaseDescriptorSupplier
      implements io.grpc.protobuf.ProtoMethodDescriptorSupplier {
    private final java.lang.String methodName;

    JobServiceMethodDescriptorSupplier(java.lang.String methodName) {
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
      synchronized (JobServiceGrpc.class) {
        result = serviceDescriptor;
        if (result == null) {
          serviceDescriptor = result = io.grpc.ServiceDescriptor.newBuilder(SERVICE_NAME)
              .setSchemaDescriptor(new JobServiceFileDescriptorSupplier())
              .addMethod(getCreateJobMethod())
              .addMethod(getBatchCreateJobsMethod())
              .addMethod(getGetJobMethod())
              .addMethod(getUpdateJobMethod())
              .addMethod(getDeleteJobMethod())
              .addMethod(getPauseJobMethod())
              .addMethod(getResumeJobMethod())
              .addMethod(getRunJobNowMethod())
              .addMethod(getCancelRunMethod())
              .addMethod(getReplayRunMethod())
              .addMethod(getBackfillJobMethod())
              .addMethod(getBulkCancelRunsMethod())
              .addMethod(getBulkReplayRunsMethod())
              .addMethod(getBulkPauseJobsMethod())
              .addMethod(getBulkResumeJobsMethod())
              .build();
        }
      }
    }
    return result;
  }
}
