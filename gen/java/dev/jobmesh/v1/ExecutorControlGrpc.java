package dev.jobmesh.v1;

import static io.grpc.MethodDescriptor.generateFullMethodName;

/**
 * <pre>
 * The executors' channel to the server: one bidirectional stream per executor.
 * The name predates the `Service` suffix convention and is part of the contract every executor speaks.
 * buf:lint:ignore SERVICE_SUFFIX
 * </pre>
 */
@io.grpc.stub.annotations.GrpcGenerated
public final class ExecutorControlGrpc {

  private ExecutorControlGrpc() {}

  public static final java.lang.String SERVICE_NAME = "jobmesh.v1.ExecutorControl";

  // Static method descriptors that strictly reflect the proto.
  private static volatile io.grpc.MethodDescriptor<dev.jobmesh.v1.ConnectRequest,
      dev.jobmesh.v1.ConnectResponse> getConnectMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "Connect",
      requestType = dev.jobmesh.v1.ConnectRequest.class,
      responseType = dev.jobmesh.v1.ConnectResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.BIDI_STREAMING)
  public static io.grpc.MethodDescriptor<dev.jobmesh.v1.ConnectRequest,
      dev.jobmesh.v1.ConnectResponse> getConnectMethod() {
    io.grpc.MethodDescriptor<dev.jobmesh.v1.ConnectRequest, dev.jobmesh.v1.ConnectResponse> getConnectMethod;
    if ((getConnectMethod = ExecutorControlGrpc.getConnectMethod) == null) {
      synchronized (ExecutorControlGrpc.class) {
        if ((getConnectMethod = ExecutorControlGrpc.getConnectMethod) == null) {
          ExecutorControlGrpc.getConnectMethod = getConnectMethod =
              io.grpc.MethodDescriptor.<dev.jobmesh.v1.ConnectRequest, dev.jobmesh.v1.ConnectResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.BIDI_STREAMING)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "Connect"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.jobmesh.v1.ConnectRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.jobmesh.v1.ConnectResponse.getDefaultInstance()))
              .setSchemaDescriptor(new ExecutorControlMethodDescriptorSupplier("Connect"))
              .build();
        }
      }
    }
    return getConnectMethod;
  }

  /**
   * Creates a new async stub that supports all call types for the service
   */
  public static ExecutorControlStub newStub(io.grpc.Channel channel) {
    io.grpc.stub.AbstractStub.StubFactory<ExecutorControlStub> factory =
      new io.grpc.stub.AbstractStub.StubFactory<ExecutorControlStub>() {
        @java.lang.Override
        public ExecutorControlStub newStub(io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
          return new ExecutorControlStub(channel, callOptions);
        }
      };
    return ExecutorControlStub.newStub(factory, channel);
  }

  /**
   * Creates a new blocking-style stub that supports all types of calls on the service
   */
  public static ExecutorControlBlockingV2Stub newBlockingV2Stub(
      io.grpc.Channel channel) {
    io.grpc.stub.AbstractStub.StubFactory<ExecutorControlBlockingV2Stub> factory =
      new io.grpc.stub.AbstractStub.StubFactory<ExecutorControlBlockingV2Stub>() {
        @java.lang.Override
        public ExecutorControlBlockingV2Stub newStub(io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
          return new ExecutorControlBlockingV2Stub(channel, callOptions);
        }
      };
    return ExecutorControlBlockingV2Stub.newStub(factory, channel);
  }

  /**
   * Creates a new blocking-style stub that supports unary and streaming output calls on the service
   */
  public static ExecutorControlBlockingStub newBlockingStub(
      io.grpc.Channel channel) {
    io.grpc.stub.AbstractStub.StubFactory<ExecutorControlBlockingStub> factory =
      new io.grpc.stub.AbstractStub.StubFactory<ExecutorControlBlockingStub>() {
        @java.lang.Override
        public ExecutorControlBlockingStub newStub(io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
          return new ExecutorControlBlockingStub(channel, callOptions);
        }
      };
    return ExecutorControlBlockingStub.newStub(factory, channel);
  }

  /**
   * Creates a new ListenableFuture-style stub that supports unary calls on the service
   */
  public static ExecutorControlFutureStub newFutureStub(
      io.grpc.Channel channel) {
    io.grpc.stub.AbstractStub.StubFactory<ExecutorControlFutureStub> factory =
      new io.grpc.stub.AbstractStub.StubFactory<ExecutorControlFutureStub>() {
        @java.lang.Override
        public ExecutorControlFutureStub newStub(io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
          return new ExecutorControlFutureStub(channel, callOptions);
        }
      };
    return ExecutorControlFutureStub.newStub(factory, channel);
  }

  /**
   * <pre>
   * The executors' channel to the server: one bidirectional stream per executor.
   * The name predates the `Service` suffix convention and is part of the contract every executor speaks.
   * buf:lint:ignore SERVICE_SUFFIX
   * </pre>
   */
  public interface AsyncService {

    /**
     * <pre>
     * Opens an executor's stream. The executor sends `hello` first; the server answers `welcome`. Every other
     * message carries a batch: 10,000 runs a second cross this stream.
     * </pre>
     */
    default io.grpc.stub.StreamObserver<dev.jobmesh.v1.ConnectRequest> connect(
        io.grpc.stub.StreamObserver<dev.jobmesh.v1.ConnectResponse> responseObserver) {
      return io.grpc.stub.ServerCalls.asyncUnimplementedStreamingCall(getConnectMethod(), responseObserver);
    }
  }

  /**
   * Base class for the server implementation of the service ExecutorControl.
   * <pre>
   * The executors' channel to the server: one bidirectional stream per executor.
   * The name predates the `Service` suffix convention and is part of the contract every executor speaks.
   * buf:lint:ignore SERVICE_SUFFIX
   * </pre>
   */
  public static abstract class ExecutorControlImplBase
      implements io.grpc.BindableService, AsyncService {

    @java.lang.Override public final io.grpc.ServerServiceDefinition bindService() {
      return ExecutorControlGrpc.bindService(this);
    }
  }

  /**
   * A stub to allow clients to do asynchronous rpc calls to service ExecutorControl.
   * <pre>
   * The executors' channel to the server: one bidirectional stream per executor.
   * The name predates the `Service` suffix convention and is part of the contract every executor speaks.
   * buf:lint:ignore SERVICE_SUFFIX
   * </pre>
   */
  public static final class ExecutorControlStub
      extends io.grpc.stub.AbstractAsyncStub<ExecutorControlStub> {
    private ExecutorControlStub(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      super(channel, callOptions);
    }

    @java.lang.Override
    protected ExecutorControlStub build(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      return new ExecutorControlStub(channel, callOptions);
    }

    /**
     * <pre>
     * Opens an executor's stream. The executor sends `hello` first; the server answers `welcome`. Every other
     * message carries a batch: 10,000 runs a second cross this stream.
     * </pre>
     */
    public io.grpc.stub.StreamObserver<dev.jobmesh.v1.ConnectRequest> connect(
        io.grpc.stub.StreamObserver<dev.jobmesh.v1.ConnectResponse> responseObserver) {
      return io.grpc.stub.ClientCalls.asyncBidiStreamingCall(
          getChannel().newCall(getConnectMethod(), getCallOptions()), responseObserver);
    }
  }

  /**
   * A stub to allow clients to do synchronous rpc calls to service ExecutorControl.
   * <pre>
   * The executors' channel to the server: one bidirectional stream per executor.
   * The name predates the `Service` suffix convention and is part of the contract every executor speaks.
   * buf:lint:ignore SERVICE_SUFFIX
   * </pre>
   */
  public static final class ExecutorControlBlockingV2Stub
      extends io.grpc.stub.AbstractBlockingStub<ExecutorControlBlockingV2Stub> {
    private ExecutorControlBlockingV2Stub(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      super(channel, callOptions);
    }

    @java.lang.Override
    protected ExecutorControlBlockingV2Stub build(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      return new ExecutorControlBlockingV2Stub(channel, callOptions);
    }

    /**
     * <pre>
     * Opens an executor's stream. The executor sends `hello` first; the server answers `welcome`. Every other
     * message carries a batch: 10,000 runs a second cross this stream.
     * </pre>
     */
    @io.grpc.ExperimentalApi("https://github.com/grpc/grpc-java/issues/10918")
    public io.grpc.stub.BlockingClientCall<dev.jobmesh.v1.ConnectRequest, dev.jobmesh.v1.ConnectResponse>
        connect() {
      return io.grpc.stub.ClientCalls.blockingBidiStreamingCall(
          getChannel(), getConnectMethod(), getCallOptions());
    }
  }

  /**
   * A stub to allow clients to do limited synchronous rpc calls to service ExecutorControl.
   * <pre>
   * The executors' channel to the server: one bidirectional stream per executor.
   * The name predates the `Service` suffix convention and is part of the contract every executor speaks.
   * buf:lint:ignore SERVICE_SUFFIX
   * </pre>
   */
  public static final class ExecutorControlBlockingStub
      extends io.grpc.stub.AbstractBlockingStub<ExecutorControlBlockingStub> {
    private ExecutorControlBlockingStub(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      super(channel, callOptions);
    }

    @java.lang.Override
    protected ExecutorControlBlockingStub build(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      return new ExecutorControlBlockingStub(channel, callOptions);
    }
  }

  /**
   * A stub to allow clients to do ListenableFuture-style rpc calls to service ExecutorControl.
   * <pre>
   * The executors' channel to the server: one bidirectional stream per executor.
   * The name predates the `Service` suffix convention and is part of the contract every executor speaks.
   * buf:lint:ignore SERVICE_SUFFIX
   * </pre>
   */
  public static final class ExecutorControlFutureStub
      extends io.grpc.stub.AbstractFutureStub<ExecutorControlFutureStub> {
    private ExecutorControlFutureStub(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      super(channel, callOptions);
    }

    @java.lang.Override
    protected ExecutorControlFutureStub build(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      return new ExecutorControlFutureStub(channel, callOptions);
    }
  }

  private static final int METHODID_CONNECT = 0;

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
        default:
          throw new AssertionError();
      }
    }

    @java.lang.Override
    @java.lang.SuppressWarnings("unchecked")
    public io.grpc.stub.StreamObserver<Req> invoke(
        io.grpc.stub.StreamObserver<Resp> responseObserver) {
      switch (methodId) {
        case METHODID_CONNECT:
          return (io.grpc.stub.StreamObserver<Req>) serviceImpl.connect(
              (io.grpc.stub.StreamObserver<dev.jobmesh.v1.ConnectResponse>) responseObserver);
        default:
          throw new AssertionError();
      }
    }
  }

  public static final io.grpc.ServerServiceDefinition bindService(AsyncService service) {
    return io.grpc.ServerServiceDefinition.builder(getServiceDescriptor())
        .addMethod(
          getConnectMethod(),
          io.grpc.stub.ServerCalls.asyncBidiStreamingCall(
            new MethodHandlers<
              dev.jobmesh.v1.ConnectRequest,
              dev.jobmesh.v1.ConnectResponse>(
                service, METHODID_CONNECT)))
        .build();
  }

  private static abstract class ExecutorControlBaseDescriptorSupplier
      implements io.grpc.protobuf.ProtoFileDescriptorSupplier, io.grpc.protobuf.ProtoServiceDescriptorSupplier {
    ExecutorControlBaseDescriptorSupplier() {}

    @java.lang.Override
    public com.google.protobuf.Descriptors.FileDescriptor getFileDescriptor() {
      return dev.jobmesh.v1.ExecutorControlProto.getDescriptor();
    }

    @java.lang.Override
    public com.google.protobuf.Descriptors.ServiceDescriptor getServiceDescriptor() {
      return getFileDescriptor().findServiceByName("ExecutorControl");
    }
  }

  private static final class ExecutorControlFileDescriptorSupplier
      extends ExecutorControlBaseDescriptorSupplier {
    ExecutorControlFileDescriptorSupplier() {}
  }

  private static final class ExecutorControlMethodDescriptorSupplier
      extends ExecutorControlBaseDescriptorSupplier
      implements io.grpc.protobuf.ProtoMethodDescriptorSupplier {
    private final java.lang.String methodName;

    ExecutorControlMethodDescriptorSupplier(java.lang.String methodName) {
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
      synchronized (ExecutorControlGrpc.class) {
        result = serviceDescriptor;
        if (result == null) {
          serviceDescriptor = result = io.grpc.ServiceDescriptor.newBuilder(SERVICE_NAME)
              .setSchemaDescriptor(new ExecutorControlFileDescriptorSupplier())
              .addMethod(getConnectMethod())
              .build();
        }
      }
    }
    return result;
  }
}
