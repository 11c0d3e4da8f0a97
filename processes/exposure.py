"""`jobmesh dev` runs whatever it is told: on loopback that is its owner's business, elsewhere anyone who
reaches the port could do it. So it refuses a non-loopback address (for gRPC or for the dashboard) unless
the calls are encrypted and authenticated, or it is told explicitly (`--allow-insecure-public`).

The dashboard's Envoy serves plain HTTP to browsers, so a dashboard on a non-loopback address always needs the
explicit flag.

`jobmesh server` is meant for networks: it listens where it is told, but says so loudly when that is a
non-loopback address served in plaintext or without authentication. Every process warns of a key, token or
secrets file that anyone on the machine may read.
"""

from __future__ import annotations

import ipaddress
import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from jobmesh.processes.settings import BY_NAME, SettingsError

ALLOW_FLAG = BY_NAME["allow_insecure_public"]


def is_loopback(address: str) -> bool:
    """`HOST:PORT` on a loopback host (`localhost`, 127.0.0.0/8, ::1), or a unix socket. A wildcard
    (`0.0.0.0`, `::`, an empty host) and other names are not: they may reach other machines."""
    if address.startswith("unix:"):
        return True
    host = address.rsplit(":", 1)[0].strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True, slots=True)
class Exposure:
    """What a `jobmesh dev` would listen on, and how its calls are protected."""

    listen: str
    dashboard_listen: str | None  # None: no dashboard
    tls: bool
    authentication: bool


def refuse_insecure_public(exposure: Exposure, *, allowed: bool) -> list[str]:
    """Raises SettingsError (naming the address's setting and the flag that allows it) for a non-loopback
    address left unprotected, unless `allowed`; the warnings to print when it is allowed."""
    unprotected = []
    if not is_loopback(exposure.listen) and not (exposure.tls and exposure.authentication):
        unprotected.append(("listen", exposure.listen, "gRPC"))
    if exposure.dashboard_listen is not None and not is_loopback(exposure.dashboard_listen):
        unprotected.append(("dashboard_listen", exposure.dashboard_listen, "the dashboard (plain HTTP)"))
    if not unprotected:
        return []
    if not allowed:
        name, address, what = unprotected[0]
        raise SettingsError(
            BY_NAME[name],
            f"{what} on {address} is not a loopback address, and calls there are not both encrypted (TLS) and"
            f" authenticated: anyone who reaches it could run commands on this machine. Listen on"
            f" 127.0.0.1, or pass {ALLOW_FLAG.flag} on ({ALLOW_FLAG.variables[0]}=on) to do it anyway",
        )
    return [
        f"WARNING: {what} on {address} is open to anyone who reaches it" for _, address, what in unprotected
    ]


def unprotected_server(listen: str, *, tls: bool, authentication: bool) -> list[str]:
    """The warning for a `jobmesh server` serving anyone who reaches it in plaintext or unauthenticated."""
    if is_loopback(listen) or (tls and authentication):
        return []
    missing = " and ".join(
        what for what, on in (("without TLS", tls), ("without authentication", authentication)) if not on
    )
    return [
        f"WARNING: gRPC on {listen} is served {missing} on an address others may reach: anyone who reaches"
        " it could read and steer jobs (and, through an executor, run commands)"
    ]


def readable_by_anyone(paths: Iterable[Path | None]) -> list[str]:
    """A warning for each credential file that every user of the machine may read."""
    warnings = []
    for path in paths:
        if path is None:
            continue
        try:
            mode = os.stat(path).st_mode
        except OSError:
            continue  # the component that reads it says what is wrong
        if mode & stat.S_IROTH:
            warnings.append(f"WARNING: {path} is readable by anyone on this machine: chmod o-rwx it")
    return warnings
