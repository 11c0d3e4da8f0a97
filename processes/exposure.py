"""`jobmesh dev` runs whatever it is told: on loopback that is its owner's business, elsewhere anyone who
reaches the port could do it. So it refuses a non-loopback address (for gRPC or for the dashboard) unless
the calls are encrypted and authenticated, or it is told explicitly (`--allow-insecure-public`).

The dashboard's Envoy serves plain HTTP to browsers, so a dashboard on a non-loopback address always needs the
explicit flag.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

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
