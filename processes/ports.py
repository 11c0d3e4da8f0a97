"""The addresses a process listens on, checked before anything starts: one that cannot be bound (another
program holds its port, the host is not this machine's, the port is privileged) stops the process with one
line that names the setting to change (processes/refusal.py).
"""

from __future__ import annotations

import contextlib
import errno
import socket

from jobmesh.processes.refusal import Refused
from jobmesh.processes.settings import BY_NAME, Setting
from jobmesh.server.config import ServerConfig


class AddressTaken(Refused):
    """No address of the setting's host can be bound to its port."""


def ensure_free(address: str, setting: Setting, what: str, alternative: str = "") -> None:
    """Raises AddressTaken when `address` (`HOST:PORT`, as `setting` took it) cannot be bound; port 0 and unix
    sockets are always free. `alternative`: another way out, said after the flag (`or --dashboard off`)."""
    if address.startswith("unix:"):
        return
    host, _, port = address.rpartition(":")
    if int(port) == 0:
        return
    problem = _bind_problem(host.strip("[]"), int(port))
    if problem is None:
        return
    code, reason = problem
    state = "is taken" if code == errno.EADDRINUSE else "cannot be listened on"
    way_out = f" {alternative}" if alternative else ""
    raise AddressTaken(
        f"the {what} address {address} {state} ({reason}): pass {setting.flag} HOST:PORT"
        f" ({setting.variables[0]}){way_out}"
    )


def ensure_addresses_free(config: ServerConfig) -> None:
    """Refuses, in one line and before anything starts, a server address that another program holds."""
    ensure_free(config.listen, BY_NAME["listen"], "gRPC")
    if config.executor_listen is not None:
        ensure_free(config.executor_listen, BY_NAME["executor_listen"], "executors'")


def _bind_problem(host: str, port: int) -> tuple[int, str] | None:
    """Why no address of `host` can be bound to `port` (errno, words), or None: the server binds every one
    it can. SO_REUSEADDR, as the server's own sockets: a port that only lingers after a close is free."""
    try:
        found = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as error:
        return error.errno or 0, str(error.strerror)
    problems: list[tuple[int, str]] = []
    for family, kind, protocol, _, where in found:
        with contextlib.closing(socket.socket(family, kind, protocol)) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind(where)
            except OSError as error:
                problems.append((error.errno or 0, error.strerror or str(error)))
                continue
        return None
    return min(problems, key=lambda problem: problem[0] != errno.EADDRINUSE, default=(0, "no address"))
