"""The server's TLS: its certificate chain and key (and the CA bundle that verifies client certificates) read
from files, and read again when they change, without a restart.

gRPC asks `CertificateFiles.fetch` before each new connection's handshake (`dynamic_ssl_server_credentials`);
it answers None while the files are unchanged (a `stat` of each), and a new configuration once they changed
and form a valid pair. A half-done rotation (the new chain beside the old key) is refused and logged once: the
server keeps serving the certificate it had, and takes the new one at the first connection after the files
agree again. Connections already open keep the certificate they were made with.

Clients that must present a certificate (executors) are served on an address of their own, `executor_listen`:
gRPC Python either requires and verifies a client certificate on a port or does not ask for one, so one port
cannot ask it of executors alone. Callers of the API (SDKs, the CLI, Envoy for the dashboard) keep the main
address, where no client certificate is asked; `ExecutorControl` is refused there (see
`ExecutorCertificateRequired`), so that an executor is always a certified one.
"""

from __future__ import annotations

import inspect
import logging
import ssl
import tempfile
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import grpc
from grpc_status import rpc_status

from jobmesh.control.v1 import executor_control_pb2
from jobmesh.core.errors import Unauthenticated
from jobmesh.server.status import status_of

__all__ = [
    "CertificateFiles",
    "ExecutorCertificateRequired",
    "ServerTls",
    "TlsFilesError",
    "has_verified_certificate",
    "server_credentials",
]

log = logging.getLogger(__name__)
# `/jobmesh.control.v1.ExecutorControl/`: the full method names of the executors' service.
EXECUTOR_CONTROL_PREFIX = f"/{executor_control_pb2.DESCRIPTOR.services_by_name['ExecutorControl'].full_name}/"


@dataclass(frozen=True, slots=True)
class ServerTls:
    """The files the server's TLS is read from: its certificate chain (leaf first) and private key in PEM,
    and the CA bundle that client certificates must chain to (needed for `executor_listen`)."""

    certificate_chain: Path
    private_key: Path
    client_ca: Path | None = None


class TlsFilesError(OSError):
    """The certificate files cannot be read, or do not form a valid key pair."""


_Signature = tuple[tuple[int, int, int], ...]


def _signature(paths: tuple[Path, ...]) -> _Signature:
    stats = [path.stat() for path in paths]
    return tuple((s.st_ino, s.st_size, s.st_mtime_ns) for s in stats)


@dataclass(frozen=True, slots=True)
class _Material:
    chain: bytes
    key: bytes
    client_ca: bytes | None


def _read(tls: ServerTls) -> _Material:
    try:
        return _Material(
            tls.certificate_chain.read_bytes(),
            tls.private_key.read_bytes(),
            tls.client_ca.read_bytes() if tls.client_ca is not None else None,
        )
    except OSError as error:
        raise TlsFilesError(f"cannot read {error.filename}: {error.strerror or error}") from None


def _check(material: _Material) -> None:
    """Raises TlsFilesError unless the chain and key form a pair and the CA bundle parses (OpenSSL through
    the standard library checks what gRPC's own handshake would refuse)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    with tempfile.TemporaryDirectory(prefix="jobmesh-tls-") as folder:
        chain, key = Path(folder) / "chain.pem", Path(folder) / "key.pem"
        chain.write_bytes(material.chain)
        key.touch(mode=0o600)
        key.write_bytes(material.key)
        try:
            context.load_cert_chain(chain, key)
            if material.client_ca is not None:
                context.load_verify_locations(cadata=material.client_ca.decode("ascii", "replace"))
        except (ssl.SSLError, ValueError) as error:
            raise TlsFilesError(f"the files do not form a valid key pair and CA bundle: {error}") from None


def _configuration(material: _Material) -> grpc.ServerCertificateConfiguration:
    return grpc.ssl_server_certificate_configuration(
        [(material.key, material.chain)], root_certificates=material.client_ca
    )


class CertificateFiles:
    """The server's certificate files, as gRPC's certificate-configuration fetcher."""

    def __init__(self, tls: ServerTls) -> None:
        self._tls = tls
        self._paths = tuple(p for p in (tls.certificate_chain, tls.private_key, tls.client_ca) if p)
        self._lock = threading.Lock()  # gRPC may ask from several threads
        self._refused: _Signature | None = None
        material = _read(tls)
        _check(material)
        self._signature = _signature(self._paths)  # after the read: a change meanwhile is read again
        self.initial = _configuration(material)

    def fetch(self) -> grpc.ServerCertificateConfiguration | None:
        """The new configuration once the files changed into a valid one; None to keep the current one."""
        with self._lock:
            try:
                signature = _signature(self._paths)
            except OSError as error:
                self._refuse(None, f"cannot read {error.filename}: {error.strerror}")
                return None
            if signature in (self._signature, self._refused):
                return None
            try:
                material = _read(self._tls)
                _check(material)
            except TlsFilesError as error:
                self._refuse(signature, str(error))
                return None
            self._signature, self._refused = signature, None
        log.info("TLS: serving the certificate now in %s", self._tls.certificate_chain)
        return _configuration(material)

    def _refuse(self, signature: _Signature | None, reason: str) -> None:
        if signature is None or signature != self._refused:
            log.warning("TLS: keeping the current certificate: %s", reason)
        self._refused = signature


def server_credentials(tls: ServerTls, *, require_client_certificate: bool) -> grpc.ServerCredentials:
    """Credentials that follow the files (one reader per port: each port takes a new configuration once).
    With `require_client_certificate`, a client must present a certificate that the CA bundle verifies, or
    the handshake fails. Raises TlsFilesError when the files are not readable or do not match."""
    files = CertificateFiles(tls)
    fetch: Callable[[], grpc.ServerCertificateConfiguration] = files.fetch  # type: ignore[assignment]
    return grpc.dynamic_ssl_server_credentials(  # the stubs miss that None means "unchanged"
        files.initial, fetch, require_client_authentication=require_client_certificate
    )


def has_verified_certificate(peer: Mapping[str, Iterable[bytes]]) -> bool:
    """Whether the call came over TLS with a client certificate. The server asks for one only on a port that
    requires it and verifies it against the client CA (gRPC Python has no "ask but do not verify" mode), so a
    certificate in the call's auth context is a verified one."""
    return list(peer.get("transport_security_type", ())) == [b"ssl"] and bool(peer.get("x509_pem_cert"))


if TYPE_CHECKING:
    Handler = grpc.RpcMethodHandler[Any, Any]
    Continuation = Callable[[grpc.HandlerCallDetails], Awaitable[Handler | None]]


class ExecutorCertificateRequired(grpc.aio.ServerInterceptor):
    """On a server with an executor address: `ExecutorControl` calls that present no verified client
    certificate (those that came to the main address) are refused UNAUTHENTICATED."""

    async def intercept_service(
        self, continuation: Continuation, handler_call_details: grpc.HandlerCallDetails
    ) -> Handler | None:
        handler = await continuation(handler_call_details)
        method: str = handler_call_details.method
        if handler is None or not method.startswith(EXECUTOR_CONTROL_PREFIX):
            return handler
        if handler.stream_stream is None:
            return handler  # every ExecutorControl method is a stream; a new kind would need a check here
        replaced: Handler = handler._replace(  # type: ignore[attr-defined]
            stream_stream=_certified(handler.stream_stream)
        )
        return replaced


def _certified(behaviour: Callable[..., Any]) -> Callable[..., Any]:
    """The same shape as `behaviour` (an async generator or a coroutine that writes), checked first."""

    async def refuse_uncertified(context: grpc.aio.ServicerContext[Any, Any]) -> None:
        if not has_verified_certificate(context.auth_context()):
            error = Unauthenticated("ExecutorControl on an address that asks no client certificate")
            log.warning("refused an executor from %s: %s", context.peer(), error.detail)
            await context.abort_with_status(rpc_status.to_status(status_of(error)))

    if inspect.isasyncgenfunction(behaviour):

        async def stream(requests: Any, context: grpc.aio.ServicerContext[Any, Any]) -> AsyncIterator[Any]:
            await refuse_uncertified(context)
            async for response in behaviour(requests, context):
                yield response

        return stream

    async def writes(requests: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
        await refuse_uncertified(context)
        return await behaviour(requests, context)

    return writes
