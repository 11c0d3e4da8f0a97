"""What /proc says about the mesh's processes: a server's workers, and who holds which TCP connection (the
parent cannot be asked, and its workers share one address)."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from tests.acceptance.mesh import Process


def workers_of(server: Process) -> list[int]:
    """The parent's worker processes (not the resource tracker that multiprocessing starts)."""
    children = Path(f"/proc/{server.popen.pid}/task/{server.popen.pid}/children")
    pids = [int(pid) for pid in children.read_text().split()] if children.exists() else []
    return [pid for pid in pids if b"spawn_main" in _cmdline(pid)]


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except FileNotFoundError:
        return b""


def tcp_ports() -> dict[int, tuple[int, int]]:
    """Every TCP socket's local and remote port, by inode."""
    found: dict[int, tuple[int, int]] = {}
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            local, remote = (int(end.rsplit(":", 1)[1], 16) for end in fields[1:3])
            found[int(fields[9])] = (local, remote)
    return found


def sockets_of(pid: int) -> set[int]:
    """The inodes of the process's sockets."""
    inodes = set()
    for descriptor in Path(f"/proc/{pid}/fd").iterdir():
        with contextlib.suppress(OSError):
            if (target := os.readlink(descriptor)).startswith("socket:["):
                inodes.add(int(target.removeprefix("socket:[").removesuffix("]")))
    return inodes
