"""Callers with real credentials, for the authorization and audit tests: a whole server with authentication
on (`tests.server.secured`), and an opaque token for each caller, listed in that server's token file.

A call made without metadata is the test's own setup and runs as an admin of every namespace (`setup`); a
call that passes metadata, even none, runs as exactly what it carries."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc

from jobmesh.core.ports.pipeline_store import SchedulerStore
from jobmesh.server.auth.opaque_tokens import new_opaque_token
from jobmesh.v1 import job_service_pb2_grpc, search_service_pb2_grpc
from tests.server.conftest import Api
from tests.server.secured import Secured, secured_server
from tests.server.tokens import TokenFile, bearer

NAMESPACE, OTHER_NAMESPACE = "team-a", "team-b"
Metadata = tuple[tuple[str, str], ...]

# Each caller's grant; its token is made once per test run.
CALLER_GRANTS: Mapping[str, Mapping[str, Any]] = {
    "viewer": {"roles": {NAMESPACE: "viewer"}},
    "operator": {"roles": {NAMESPACE: "operator"}},
    "admin": {"roles": {NAMESPACE: "admin"}},
    "other-namespace": {"roles": {OTHER_NAMESPACE: "admin"}},
    "no-role": {},
    "setup": {"roles": {"*": "admin"}},
}
_CALLER_TOKENS = {name: new_opaque_token() for name in CALLER_GRANTS}


def as_caller(name: str) -> Metadata:
    """The call metadata that makes a call run as CALLER_GRANTS[name]."""
    return bearer(_CALLER_TOKENS[name])


def add_callers(tokens: TokenFile) -> None:
    for name, grant in CALLER_GRANTS.items():
        tokens.add(name, token=_CALLER_TOKENS[name], **grant)


class _SetupCredential(grpc.UnaryUnaryClientInterceptor, grpc.UnaryStreamClientInterceptor):
    """Sends the setup caller's token with every call made without metadata."""

    def _with_setup(self, details: grpc.ClientCallDetails) -> grpc.ClientCallDetails:
        if details.metadata is not None:
            return details
        return _Details(
            details.method,
            details.timeout,
            as_caller("setup"),
            details.credentials,
            details.wait_for_ready,
            details.compression,
        )

    def intercept_unary_unary(
        self, continuation: Callable[..., Any], details: grpc.ClientCallDetails, request: Any
    ) -> Any:
        return continuation(self._with_setup(details), request)

    def intercept_unary_stream(
        self, continuation: Callable[..., Any], details: grpc.ClientCallDetails, request: Any
    ) -> Any:
        return continuation(self._with_setup(details), request)


@dataclass(frozen=True)
class _Details(grpc.ClientCallDetails):
    method: str
    timeout: float | None
    metadata: Any
    credentials: Any
    wait_for_ready: bool | None
    compression: Any


@dataclass
class CallerApi(Api):
    secured: Secured


@contextlib.contextmanager
def callers_api(store: SchedulerStore, directory: Path) -> Iterator[CallerApi]:
    """The API of a server with authentication on, whose token file lists every caller of CALLER_GRANTS."""
    with (
        secured_server(store, directory, add_tokens=add_callers) as secured,
        grpc.insecure_channel(secured.address) as plain,
    ):
        channel = grpc.intercept_channel(plain, _SetupCredential())
        yield CallerApi(
            job_service_pb2_grpc.JobServiceStub(channel),
            search_service_pb2_grpc.SearchServiceStub(channel),
            store,
            secured.address,
            secured,
        )
