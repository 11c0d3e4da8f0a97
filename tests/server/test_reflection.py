"""The server's reflection, asked as grpcurl asks it: the contract's files come with their source info (the
protos' comments), each with its imports; gRPC's own services, which the contract's set lacks, are still
described; and what nothing holds is NOT_FOUND."""

from __future__ import annotations

import grpc
from google.protobuf import descriptor_pb2
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from tests.server.conftest import Api


def ask(api: Api, request: reflection_pb2.ServerReflectionRequest) -> reflection_pb2.ServerReflectionResponse:
    with grpc.insecure_channel(api.address) as channel:
        [answer] = reflection_pb2_grpc.ServerReflectionStub(channel).ServerReflectionInfo(
            iter([request]), timeout=10
        )
        return answer


def files_of(
    answer: reflection_pb2.ServerReflectionResponse,
) -> dict[str, descriptor_pb2.FileDescriptorProto]:
    protos = map(
        descriptor_pb2.FileDescriptorProto.FromString, answer.file_descriptor_response.file_descriptor_proto
    )
    return {proto.name: proto for proto in protos}


def comments(proto: descriptor_pb2.FileDescriptorProto) -> str:
    return "\n".join(location.leading_comments for location in proto.source_code_info.location)


def test_a_symbol_comes_with_its_comments_and_its_imports(api: Api) -> None:
    files = files_of(
        ask(api, reflection_pb2.ServerReflectionRequest(file_containing_symbol="jobmesh.v1.Job"))
    )
    job = files["jobmesh/v1/job.proto"]
    assert "Opaque version for optimistic concurrency" in comments(job)
    assert {"google/api/resource.proto", "google/protobuf/duration.proto"} <= set(files)
    assert "Denotes a field as required." in comments(files["google/api/field_behavior.proto"])


def test_the_executor_protocol_is_its_own_package(api: Api) -> None:
    request = reflection_pb2.ServerReflectionRequest(
        file_by_filename="jobmesh/control/v1/executor_control.proto"
    )
    files = files_of(ask(api, request))
    control = files["jobmesh/control/v1/executor_control.proto"]
    assert control.package == "jobmesh.control.v1"
    assert [service.name for service in control.service] == ["ExecutorControl"]
    assert "How an executor works, in order" in comments(control)
    assert "jobmesh/v1/run.proto" in files  # it reuses the public RunState, RunError and LogLine


def test_grpcs_own_services_are_described_without_comments(api: Api) -> None:
    symbol = "grpc.health.v1.Health"
    files = files_of(ask(api, reflection_pb2.ServerReflectionRequest(file_containing_symbol=symbol)))
    assert [service.name for proto in files.values() for service in proto.service] == ["Health"]


def test_an_unknown_symbol_is_not_found(api: Api) -> None:
    request = reflection_pb2.ServerReflectionRequest(file_containing_symbol="jobmesh.v1.ExecutorControl")
    answer = ask(api, request)
    assert answer.error_response.error_code == grpc.StatusCode.NOT_FOUND.value[0]


def test_the_extensions_of_an_option_type_are_listed(api: Api) -> None:
    request = reflection_pb2.ServerReflectionRequest(
        all_extension_numbers_of_type="google.protobuf.MethodOptions"
    )
    numbers = set(ask(api, request).all_extension_numbers_response.extension_number)
    assert 1051 in numbers  # google.api.method_signature
