"""The TLS of a channel to the jobmesh server: which CA bundle verifies the server, which client certificate
(if any) the caller presents, and which name the server's certificate must carry.

Executors, the process wiring and SDKs build their channels here, so that every caller speaks TLS the same
way. Files are read when a channel is opened: a caller that opens a new channel after its certificate was
renewed presents the new one. This module depends on grpcio alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc

__all__ = ["ChannelTls", "TlsFileError", "aio_channel", "channel", "channel_credentials"]

ChannelOptions = Sequence[tuple[str, Any]]


class TlsFileError(OSError):
    """A certificate or key file that cannot be read."""


@dataclass(frozen=True, slots=True)
class ChannelTls:
    """TLS towards the server. No CA bundle: the system's roots verify it. A client certificate goes with its
    key. `server_name`: the name checked in the server's certificate (and sent as SNI) when the address
    dialled is not that name, such as an IP address or a proxy."""

    ca_bundle: Path | None = None
    client_certificate: Path | None = None
    client_key: Path | None = None
    server_name: str | None = None

    def __post_init__(self) -> None:
        if (self.client_certificate is None) != (self.client_key is None):
            raise ValueError("a client certificate and its key go together: give both or neither")


def _read(path: Path | None, what: str) -> bytes | None:
    if path is None:
        return None
    try:
        return path.read_bytes()
    except OSError as error:
        raise TlsFileError(f"cannot read the {what} {path}: {error.strerror or error}") from None


def channel_credentials(tls: ChannelTls) -> grpc.ChannelCredentials:
    """The credentials of one channel, from the files as they are now."""
    return grpc.ssl_channel_credentials(
        root_certificates=_read(tls.ca_bundle, "CA bundle"),
        private_key=_read(tls.client_key, "client key"),
        certificate_chain=_read(tls.client_certificate, "client certificate"),
    )


def _options(tls: ChannelTls | None, options: ChannelOptions) -> list[tuple[str, Any]]:
    if tls is not None and tls.server_name:
        return [*options, ("grpc.ssl_target_name_override", tls.server_name)]
    return list(options)


def aio_channel(address: str, tls: ChannelTls | None, options: ChannelOptions = ()) -> grpc.aio.Channel:
    """An asyncio channel to `address`: TLS when `tls` is given, plaintext otherwise."""
    if tls is None:
        return grpc.aio.insecure_channel(address, options=_options(None, options))
    return grpc.aio.secure_channel(address, channel_credentials(tls), options=_options(tls, options))


def channel(address: str, tls: ChannelTls | None, options: ChannelOptions = ()) -> grpc.Channel:
    """The same, blocking (scripts, SDKs, tests)."""
    if tls is None:
        return grpc.insecure_channel(address, options=_options(None, options))
    return grpc.secure_channel(address, channel_credentials(tls), options=_options(tls, options))
