"""What an executor will run: its allowlist of command programs and of HTTP destinations, and the environment
its commands start with (docs/design.md, "What an executor runs").

- A command's program is looked up as the kernel would (on the command's PATH, or relative to its working
  directory), made absolute and normalised, and must match a pattern of `commands` either as that path or as
  the file it finally links to: `sh` on the PATH and `../../bin/sh` are the same `/usr/bin/sh`. Patterns are
  absolute paths where `*` and `?` stay within one path segment and `**` spans any number (`/**` is any).
- An HTTP target's scheme, port and host name must be allowed, and every address its host resolves to must
  lie in `networks`: CIDRs, `public` (globally routable unicast, the default: no loopback, private,
  link-local or cloud metadata address, multicast or unspecified one), or `any`. The call then connects to a
  checked address, never resolving the name again (executor/webhook.py), so DNS cannot be rebound between.
"""

from __future__ import annotations

import fnmatch
import ipaddress
import os
import re
import socket
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from urllib.parse import SplitResult

from jobmesh.core.errors import InvalidConfig

__all__ = [
    "ANY_NETWORK",
    "PUBLIC_NETWORKS",
    "SAFE_PATH",
    "Destination",
    "ExecutionPolicy",
    "TargetRefused",
]

SAFE_PATH = "/usr/local/bin:/usr/bin:/bin"
INHERIT_PATH = "inherit"  # `command_path`: the executor's own PATH
PUBLIC_NETWORKS = "public"
ANY_NETWORK = "any"
DEFAULT_PORTS = {"http": 80, "https": 443}
# What a command gets of the executor's own environment, besides PATH.
INHERITED_VARIABLES = ("HOME", "LANG", "LC_ALL")

_WILDCARDS = re.compile(r"[*?\[]")

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network


class TargetRefused(Exception):
    """The allowlist refused a target; the message names the rule (and never an environment value)."""


@dataclass(frozen=True, slots=True)
class Destination:
    """A checked HTTP destination: connect to one of `addresses`, and speak to `host` (SNI, Host header)."""

    scheme: str
    host: str
    port: int
    addresses: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class ExecutionPolicy:
    allowed_commands: tuple[str, ...] = ()  # none: no command runs
    allowed_hosts: tuple[str, ...] = ("*",)
    allowed_networks: tuple[str, ...] = (PUBLIC_NETWORKS,)
    allowed_ports: tuple[int, ...] = ()  # none: any port
    allowed_schemes: tuple[str, ...] = ("http", "https")
    command_path: str = SAFE_PATH  # the PATH commands get and are looked up on, or `inherit`

    def __post_init__(self) -> None:
        for pattern in self.allowed_commands:
            if not pattern.startswith("/"):
                raise InvalidConfig("allowed_commands", f"{pattern!r} is not an absolute path or pattern")
        for network in self.allowed_networks:
            if network not in (PUBLIC_NETWORKS, ANY_NETWORK):
                try:
                    ipaddress.ip_network(network, strict=False)
                except ValueError:
                    raise InvalidConfig(
                        "allowed_networks", f"{network!r} is not a CIDR, `public` or `any`"
                    ) from None
        if bad := [port for port in self.allowed_ports if not 0 < port < 65536]:
            raise InvalidConfig("allowed_ports", f"{bad[0]} is not a port")
        if bad_schemes := [s for s in self.allowed_schemes if s not in DEFAULT_PORTS]:
            raise InvalidConfig("allowed_schemes", f"{bad_schemes[0]!r} is neither http nor https")
        if not self.command_path:
            raise InvalidConfig("command_path", f"a PATH, or {INHERIT_PATH}")

    @classmethod
    def unrestricted(cls) -> ExecutionPolicy:
        """`jobmesh dev`'s: any program, any destination, loopback included."""
        return cls(allowed_commands=("/**",), allowed_networks=(ANY_NETWORK,))

    def describe(self) -> str:
        """One line for the start-up log."""
        commands = ", ".join(self.allowed_commands) or "none"
        networks = ", ".join(self.allowed_networks)
        if self.allowed_commands == ("/**",) and ANY_NETWORK in self.allowed_networks:
            return (
                "runs ANY command and calls ANY address, loopback and private networks included"
                " (set --allowed-commands and --allowed-networks to restrict it)"
            )
        return f"runs commands {commands}; calls hosts {', '.join(self.allowed_hosts)} in networks {networks}"

    # Commands. ---------------------------------------------------------------------------------------------

    def environment(self, inherited: Mapping[str, str]) -> dict[str, str]:
        """What a command starts with before its job's `env`: PATH, HOME, LANG and LC_ALL, nothing else of the
        executor's (whose environment may hold its own credentials and secrets)."""
        base = {name: inherited[name] for name in INHERITED_VARIABLES if name in inherited}
        base["PATH"] = self._path(inherited)
        return base

    def check_env(self, names: Iterable[str]) -> None:
        """A job's `env` may not steer the dynamic loader: `LD_PRELOAD` would run code of its choosing inside
        an allowed program."""
        if loader := sorted(name for name in names if name.startswith("LD_")):
            raise TargetRefused(f"the job's env sets {loader[0]}, which no command may be given (LD_*)")

    def check_command(self, argv0: str, working_dir: str, environment: Mapping[str, str]) -> str | None:
        """The absolute path of the program to start (None: not found on the PATH), or TargetRefused.
        `environment` is the command's own."""
        program = resolve_program(argv0, environment.get("PATH", ""), working_dir)
        if program is None:
            return None
        candidates = (program, os.path.realpath(program))
        if not any(_allows(pattern, candidates) for pattern in self.allowed_commands):
            shown = program if candidates[1] == program else f"{program} (-> {candidates[1]})"
            raise TargetRefused(
                f"program {shown} is not on this executor's command allowlist (allowed_commands)"
            )
        return program

    def _path(self, inherited: Mapping[str, str]) -> str:
        if self.command_path == INHERIT_PATH:
            return inherited.get("PATH", SAFE_PATH)
        return self.command_path

    # HTTP destinations. ------------------------------------------------------------------------------------

    def check_http(self, url: SplitResult) -> Destination:
        """Resolves the host (a blocking call) and checks every address; TargetRefused names the rule."""
        scheme = url.scheme.lower()
        if scheme not in self.allowed_schemes:
            raise TargetRefused(f"scheme {scheme!r} is not allowed (allowed_schemes)")
        host = (url.hostname or "").lower()
        port = url.port or DEFAULT_PORTS[scheme]
        if self.allowed_ports and port not in self.allowed_ports:
            raise TargetRefused(f"port {port} is not allowed (allowed_ports)")
        if not any(fnmatch.fnmatchcase(host, pattern.lower()) for pattern in self.allowed_hosts):
            raise TargetRefused(f"host {host!r} is not allowed (allowed_hosts)")
        try:
            found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except socket.gaierror as exc:
            raise OSError(f"cannot resolve {host!r}: {exc.strerror}") from None
        addresses = tuple(dict.fromkeys(str(info[4][0]) for info in found))
        for text in addresses:
            address = _plain(ipaddress.ip_address(text.split("%", 1)[0]))
            if not self._network_allows(address):
                raise TargetRefused(
                    f"host {host!r} resolves to {address}, a {_kind(address)} address outside the allowed"
                    f" networks {', '.join(self.allowed_networks)} (allowed_networks)"
                )
        return Destination(scheme, host, port, addresses)

    def _network_allows(self, address: Address) -> bool:
        for network in self.allowed_networks:
            if network == ANY_NETWORK:
                return True
            if network == PUBLIC_NETWORKS:
                if address.is_global and not address.is_multicast:
                    return True
            elif address in ipaddress.ip_network(network, strict=False):
                return True
        return False


def resolve_program(argv0: str, path: str, working_dir: str) -> str | None:
    """Where the program of `argv0` is, absolute and normalised (`..` removed), as exec would find it. A
    PATH entry that is not absolute is skipped: it would depend on the working directory."""
    if "/" in argv0:
        base = os.path.abspath(working_dir or os.getcwd())
        return os.path.normpath(os.path.join(base, argv0))
    for directory in path.split(os.pathsep):
        if not os.path.isabs(directory):
            continue
        candidate = os.path.join(directory, argv0)
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return os.path.normpath(candidate)
    return None


def _allows(pattern: str, candidates: tuple[str, str]) -> bool:
    """The program as found, or the file it links to, matches; a plain path also allows what it links to
    (`/bin/sh` allows `/usr/bin/sh` where both are `dash`)."""
    if any(_path_matches(pattern, path) for path in candidates):
        return True
    return not _WILDCARDS.search(pattern) and os.path.realpath(pattern) == candidates[1]


def _path_matches(pattern: str, path: str) -> bool:
    return _segments_match(pattern.strip("/").split("/"), path.strip("/").split("/"))


def _segments_match(pattern: Sequence[str], path: Sequence[str]) -> bool:
    if not pattern:
        return not path
    head, rest = pattern[0], pattern[1:]
    if head == "**":
        return any(_segments_match(rest, path[skip:]) for skip in range(len(path) + 1))
    return bool(path) and fnmatch.fnmatchcase(path[0], head) and _segments_match(rest, path[1:])


def _plain(address: Address) -> Address:
    """An IPv4 address mapped into IPv6 (`::ffff:127.0.0.1`) is judged as the IPv4 address it is."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def _kind(address: Address) -> str:
    for kind, flag in (
        ("loopback", address.is_loopback),
        ("link-local (cloud metadata lives there)", address.is_link_local),
        ("multicast", address.is_multicast),
        ("unspecified", address.is_unspecified),
        ("private", address.is_private),
        ("reserved", address.is_reserved),
    ):
        if flag:
            return kind
    return "non-public" if not address.is_global else "public"
