"""The commands a starting server prints for its user to try (`  try: COMMAND`): each works as printed, in a
POSIX shell, from the folder the process was started in (for `make run`, the repository's root).

A program that the PATH does not find is named by the path of the one installed beside this interpreter (the
venv's `grpcurl`), relative to that folder when it lies below it; a program found nowhere is not offered.
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from pathlib import Path

from jobmesh.server.config import ServerConfig
from jobmesh.transport.tls import ChannelTls

HEALTH_CHECK = "grpc.health.v1.Health/Check"
_LOOPBACK = {"": "127.0.0.1", "0.0.0.0": "127.0.0.1", "[::]": "[::1]"}  # a wildcard is reached on loopback


def program(name: str) -> str | None:
    """How a shell in this process's folder runs `name`: its bare name when the PATH finds it, else the path
    of the one beside this interpreter (`.venv/bin/grpcurl`), else None."""
    if shutil.which(name) is not None:
        return name
    beside = Path(sys.executable).parent / name
    if not (beside.is_file() and os.access(beside, os.X_OK)):
        return None
    try:
        return shlex.quote(str(beside.absolute().relative_to(Path.cwd())))
    except ValueError:
        return shlex.quote(str(beside.absolute()))


def grpcurl_command(config: ServerConfig, port: int, tls: ChannelTls | None = None) -> str | None:
    """A grpcurl call that this server answers without a credential: the list of its services (by
    reflection), else its health; None when grpcurl is missing or every call needs a credential. `tls`: what
    verifies the server's certificate (its CA, the name it carries), when the process knows it."""
    grpcurl = program("grpcurl")
    call = _open_call(config)
    if grpcurl is None or call is None:
        return None
    words = [grpcurl, *_security(config, tls), *_target(config.listen, port), call]
    return " ".join(words)


def _open_call(config: ServerConfig) -> str | None:
    if not config.authentication or "reflection" in config.open_services:
        return "list"
    return HEALTH_CHECK if "health" in config.open_services else None


def _security(config: ServerConfig, tls: ChannelTls | None) -> list[str]:
    if config.tls is None:
        return ["-plaintext"]
    flags = []  # without a CA, the system's roots verify the certificate
    if tls is not None and tls.ca_bundle is not None:
        flags += ["-cacert", shlex.quote(str(tls.ca_bundle.absolute()))]
    if tls is not None and tls.server_name is not None:
        flags += ["-servername", shlex.quote(tls.server_name)]
    return flags


def _target(listen: str, port: int) -> list[str]:
    if listen.startswith("unix:"):
        return ["-unix", shlex.quote(listen.removeprefix("unix:"))]
    host = listen.rsplit(":", 1)[0]
    return [f"{_LOOPBACK.get(host, host)}:{port}"]
