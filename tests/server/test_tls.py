"""The server's TLS with real certificates: serving, client certificates required on the executor address,
a wrong CA refused either way, and certificate files renewed while the server runs.

A tiny servicer answers with what the server knows of the caller (`context.auth_context()`), on a server made
as jobmesh makes its own (`new_grpc_server`, `server_credentials`).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import os
import socket
import ssl
import warnings
from collections.abc import AsyncIterator, Coroutine
from pathlib import Path
from typing import Any, TypeVar

import grpc
import pytest

from jobmesh.core.errors import Unauthenticated
from jobmesh.server.app import new_grpc_server
from jobmesh.server.auth.client_certificates import (
    CertificateGrant,
    ClientCertificates,
    parse_certificate_grants,
)
from jobmesh.server.auth.tls import CertificateFiles, ServerTls, TlsFilesError, server_credentials
from jobmesh.transport.tls import ChannelTls, aio_channel
from tests.support_certificates import CertificateAuthority, Leaf, serial_of_pem

T = TypeVar("T")
WHO = "/jobmesh.test.Peer/Who"
EXECUTOR_CONNECT = "/jobmesh.control.v1.ExecutorControl/Connect"
GRANTS = parse_certificate_grants("executor-1=default+mail,*=default")


def _same(data: bytes) -> bytes:
    return data


def _peer_view(context: grpc.aio.ServicerContext[Any, Any]) -> bytes:
    auth = {key: list(values) for key, values in context.auth_context().items()}
    peer = {key: [v.decode("utf-8", "replace") for v in values] for key, values in auth.items()}
    principal: dict[str, Any] | None = None
    try:
        found = ClientCertificates(GRANTS).principal_of({}, auth)
    except Unauthenticated as error:
        principal = {"refused": error.detail}
    else:
        if found is not None and found.executor is not None:
            principal = {"name": found.executor.name, "queues": sorted(found.executor.queues)}
    return json.dumps({"peer": peer, "principal": principal}).encode()


async def _who(request: bytes, context: grpc.aio.ServicerContext[Any, Any]) -> bytes:
    return _peer_view(context)


async def _connect(requests: AsyncIterator[bytes], context: grpc.aio.ServicerContext[Any, Any]) -> None:
    async for _ in requests:
        await context.write(_peer_view(context))
        return


HANDLERS = grpc.method_handlers_generic_handler(
    "jobmesh.test.Peer", {"Who": grpc.unary_unary_rpc_method_handler(_who)}
)
EXECUTOR_HANDLERS = grpc.method_handlers_generic_handler(
    "jobmesh.control.v1.ExecutorControl", {"Connect": grpc.stream_stream_rpc_method_handler(_connect)}
)


@contextlib.asynccontextmanager
async def serving(tls: ServerTls, *, executor_address: bool = False) -> AsyncIterator[tuple[int, int | None]]:
    """The main port (TLS, no client certificate asked) and, if asked, an executor port (mutual TLS)."""
    server = new_grpc_server(certified_executors=executor_address)
    server.add_generic_rpc_handlers([HANDLERS, EXECUTOR_HANDLERS])
    port = server.add_secure_port("127.0.0.1:0", server_credentials(tls, require_client_certificate=False))
    executors = None
    if executor_address:
        credentials = server_credentials(tls, require_client_certificate=True)
        executors = server.add_secure_port("127.0.0.1:0", credentials)
    await server.start()
    try:
        yield port, executors
    finally:
        await server.stop(None)


async def who(port: int, tls: ChannelTls | None, method: str = WHO) -> dict[str, Any]:
    async with aio_channel(f"127.0.0.1:{port}", tls) as channel:
        answer: object
        if method == WHO:
            answer = await channel.unary_unary(method, _same, _same)(b"", timeout=10)
        else:
            call = channel.stream_stream(method, _same, _same)()
            await call.write(b"hello")
            answer = await call.read()
            call.cancel()
        assert isinstance(answer, bytes), answer
        result: dict[str, Any] = json.loads(answer)
        return result


async def refused(port: int, tls: ChannelTls | None, method: str = WHO) -> grpc.StatusCode:
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await who(port, tls, method)
    return raised.value.code()


def run(coroutine: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coroutine)


@pytest.fixture
def ca(tmp_path: Path) -> CertificateAuthority:
    authority = CertificateAuthority("jobmesh test CA")
    authority.write(tmp_path / "ca.pem")
    return authority


@pytest.fixture
def server_leaf(ca: CertificateAuthority, tmp_path: Path) -> Leaf:
    return ca.issue_server(tmp_path / "server")


@pytest.fixture
def server_tls(server_leaf: Leaf, tmp_path: Path) -> ServerTls:
    return ServerTls(server_leaf.chain, server_leaf.key, client_ca=tmp_path / "ca.pem")


def test_a_client_that_trusts_the_ca_is_served_over_tls(server_tls: ServerTls, tmp_path: Path) -> None:
    async def scenario() -> dict[str, Any]:
        async with serving(server_tls) as (port, _):
            return await who(port, ChannelTls(ca_bundle=tmp_path / "ca.pem"))

    answer = run(scenario())
    assert answer["peer"]["transport_security_type"] == ["ssl"]
    assert "x509_pem_cert" not in answer["peer"]  # no client certificate is asked on the main address
    assert answer["principal"] is None


def test_a_plaintext_client_is_not_served(server_tls: ServerTls) -> None:
    async def scenario() -> grpc.StatusCode:
        async with serving(server_tls) as (port, _):
            return await refused(port, None)

    assert run(scenario()) == grpc.StatusCode.UNAVAILABLE


def test_a_client_that_trusts_another_ca_refuses_the_server(server_tls: ServerTls, tmp_path: Path) -> None:
    other = CertificateAuthority("another CA").write(tmp_path / "other-ca.pem")

    async def scenario() -> grpc.StatusCode:
        async with serving(server_tls) as (port, _):
            return await refused(port, ChannelTls(ca_bundle=other))

    assert run(scenario()) == grpc.StatusCode.UNAVAILABLE


def test_the_server_name_can_differ_from_the_address_dialled(
    ca: CertificateAuthority, tmp_path: Path
) -> None:
    leaf = ca.issue_server(tmp_path / "named", names=("jobmesh.internal",))
    tls = ServerTls(leaf.chain, leaf.key)

    async def scenario() -> tuple[dict[str, Any], grpc.StatusCode]:
        async with serving(tls) as (port, _):
            named = ChannelTls(ca_bundle=tmp_path / "ca.pem", server_name="jobmesh.internal")
            return await who(port, named), await refused(port, ChannelTls(ca_bundle=tmp_path / "ca.pem"))

    answer, unnamed = run(scenario())
    assert answer["peer"]["transport_security_type"] == ["ssl"]
    assert unnamed == grpc.StatusCode.UNAVAILABLE  # 127.0.0.1 is not a name of that certificate


def test_the_executor_address_requires_a_certificate_of_the_client_ca(
    ca: CertificateAuthority, server_tls: ServerTls, tmp_path: Path
) -> None:
    executor = ca.issue_client(tmp_path / "executor-1", "executor-1")
    stranger = CertificateAuthority("another CA").issue_client(tmp_path / "stranger", "executor-1")
    trust = tmp_path / "ca.pem"

    async def scenario() -> tuple[dict[str, Any], grpc.StatusCode, grpc.StatusCode]:
        async with serving(server_tls, executor_address=True) as (_, port):
            assert port is not None
            certified = ChannelTls(trust, executor.chain, executor.key)
            bare = await refused(port, ChannelTls(ca_bundle=trust))
            foreign = await refused(port, ChannelTls(trust, stranger.chain, stranger.key))
            return await who(port, certified), bare, foreign

    answer, bare, foreign = run(scenario())
    assert bare == grpc.StatusCode.UNAVAILABLE  # the handshake itself fails
    assert foreign == grpc.StatusCode.UNAVAILABLE
    assert answer["peer"]["x509_common_name"] == ["executor-1"]
    assert answer["principal"] == {"name": "executor-1", "queues": ["default", "mail"]}


def test_executor_control_is_refused_on_the_main_address(
    ca: CertificateAuthority, server_tls: ServerTls, tmp_path: Path
) -> None:
    executor = ca.issue_client(tmp_path / "executor-2", "executor-2")
    trust = tmp_path / "ca.pem"

    async def scenario() -> tuple[grpc.StatusCode, dict[str, Any], dict[str, Any]]:
        async with serving(server_tls, executor_address=True) as (main, executors):
            assert executors is not None
            on_main = await refused(main, ChannelTls(trust, executor.chain, executor.key), EXECUTOR_CONNECT)
            api_on_main = await who(main, ChannelTls(ca_bundle=trust))
            certified = await who(
                executors, ChannelTls(trust, executor.chain, executor.key), EXECUTOR_CONNECT
            )
            return on_main, api_on_main, certified

    on_main, api_on_main, certified = run(scenario())
    assert on_main == grpc.StatusCode.UNAUTHENTICATED
    assert api_on_main["peer"]["transport_security_type"] == ["ssl"]  # the rest of the API is served there
    assert certified["principal"] == {"name": "executor-2", "queues": ["default"]}  # the `*` grant


def test_a_certificate_whose_name_is_granted_nothing_stands_for_no_executor(
    ca: CertificateAuthority, server_tls: ServerTls, tmp_path: Path
) -> None:
    leaf = ca.issue_client(tmp_path / "nobody", "nobody")
    trust = tmp_path / "ca.pem"

    async def scenario() -> dict[str, Any]:
        async with serving(server_tls, executor_address=True) as (_, port):
            assert port is not None
            return await who(port, ChannelTls(trust, leaf.chain, leaf.key))

    answer = run(scenario())
    peer = {k: [v.encode() for v in vs] for k, vs in answer["peer"].items()}
    with pytest.raises(Unauthenticated):
        ClientCertificates({"executor-1": CertificateGrant(frozenset({"default"}))}).principal_of({}, peer)
    assert ClientCertificates(GRANTS).principal_of({}, {"transport_security_type": [b"insecure"]}) is None


def _served_serial(port: int, trust: Path) -> int:
    """The serial of the certificate a new TLS connection to the server gets."""
    context = ssl.create_default_context(cafile=str(trust))
    context.set_alpn_protocols(["h2"])
    raw = socket.create_connection(("127.0.0.1", port), timeout=10)
    with context.wrap_socket(raw, server_hostname="localhost") as tls:
        der = tls.getpeercert(binary_form=True)
    assert der is not None
    return serial_of_pem(ssl.DER_cert_to_PEM_cert(der).encode())


def _replace(source: Path, target: Path) -> None:
    """As a renewal tool writes a file: a new file moved over the old one."""
    staged = target.with_suffix(".new")
    staged.write_bytes(source.read_bytes())
    os.replace(staged, target)


def test_renewed_files_are_served_to_new_connections_without_a_restart(
    ca: CertificateAuthority, server_leaf: Leaf, server_tls: ServerTls, tmp_path: Path
) -> None:
    renewed = ca.issue_server(tmp_path / "renewed")
    trust = tmp_path / "ca.pem"

    async def scenario() -> list[int]:
        serials = []
        async with serving(server_tls) as (port, _):
            async with aio_channel(f"127.0.0.1:{port}", ChannelTls(ca_bundle=trust)) as before:
                await before.unary_unary(WHO, _same, _same)(b"", timeout=10)
                serials.append(await asyncio.to_thread(_served_serial, port, trust))
                _replace(renewed.chain, server_leaf.chain)  # half done: the new chain beside the old key
                serials.append(await asyncio.to_thread(_served_serial, port, trust))
                _replace(renewed.key, server_leaf.key)
                serials.append(await asyncio.to_thread(_served_serial, port, trust))
                # The connection made before still serves.
                await before.unary_unary(WHO, _same, _same)(b"", timeout=10)
            await who(port, ChannelTls(ca_bundle=trust))
        return serials

    assert run(scenario()) == [server_leaf.serial, server_leaf.serial, renewed.serial]


def test_files_that_do_not_match_are_refused_at_start(
    ca: CertificateAuthority, server_leaf: Leaf, tmp_path: Path
) -> None:
    other = ca.issue_server(tmp_path / "other")
    with pytest.raises(TlsFilesError, match="key pair"):
        CertificateFiles(ServerTls(server_leaf.chain, other.key))
    with pytest.raises(TlsFilesError, match="cannot read"):
        CertificateFiles(ServerTls(tmp_path / "missing.pem", other.key))


def test_certificate_grants_parse_and_bad_ones_are_refused() -> None:
    assert parse_certificate_grants("a=q1+q2, *=*") == {
        "a": CertificateGrant(frozenset({"q1", "q2"})),
        "*": CertificateGrant(frozenset({"*"})),
    }
    for bad in ("", "a", "a=", "=q", "a=Not A Queue"):
        with pytest.raises(ValueError, match=r"expected|queue name"):
            parse_certificate_grants(bad)


def _handshake(port: int, trust: Path, version: ssl.TLSVersion) -> str:
    """The TLS version agreed with a client that offers `version` alone (and every cipher, so that the
    client's own policy refuses nothing the server might accept)."""
    context = ssl.create_default_context(cafile=str(trust))
    context.set_ciphers("ALL:@SECLEVEL=0")
    context.set_alpn_protocols(["h2"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # TLS 1.0 and 1.1, offered on purpose
        context.minimum_version = context.maximum_version = version
    with (
        socket.create_connection(("127.0.0.1", port), timeout=10) as raw,
        context.wrap_socket(raw, server_hostname="localhost") as tls,
    ):
        return str(tls.version())


@pytest.mark.parametrize("version", ["TLSv1", "TLSv1_1"])
def test_tls_before_1_2_is_refused(server_tls: ServerTls, tmp_path: Path, version: str) -> None:
    async def scenario() -> None:
        async with serving(server_tls) as (port, _):
            handshake = functools.partial(_handshake, port, tmp_path / "ca.pem")
            loop = asyncio.get_running_loop()
            assert await loop.run_in_executor(None, handshake, ssl.TLSVersion.TLSv1_2) == "TLSv1.2"
            with pytest.raises(ssl.SSLError) as refused:
                await loop.run_in_executor(None, handshake, ssl.TLSVersion[version])
            assert "NO_PROTOCOLS_AVAILABLE" not in str(refused.value)  # the client did offer it

    run(scenario())
