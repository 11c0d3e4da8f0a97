"""The chaos run's services and mesh: private PostgreSQL (fsync on), Kafka and Redis on ports of their own;
one server with its workers, two watchers and two executors, each serving `/readyz` on a port of its own;
and a poller that asks each of them, and the server's gRPC health, what it says every second.

Every process is started in a session of its own and can be killed, stopped, continued and started again
alone. Whatever happens, `ChaosMesh.stop` continues what was stopped before it stops anything, and the
services are brought down by `private_services`.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
SERVICES_SCRIPT = REPO / "tools" / "services" / "services.sh"
# postgres redis kafka kafka-controller redis-tls kafka-tls: below the kernel's ephemeral range, away from
# the suite's defaults (25432 26379 29092 ...)
DEFAULT_PORTS = "24432 24379 24092 24093 24380 24094"
SERVICE_NAMES = ("JOBMESH_DATABASE_URL", "JOBMESH_KAFKA_BOOTSTRAP", "JOBMESH_REDIS_URL")
SERVICE_TIMEOUT = 150.0  # seconds for one `services.sh` call (a Kafka start waits up to 90 s)


# ---------------------------------------------------------------- services


@dataclass
class Services:
    state: Path
    env: dict[str, str]

    def control(self, service: str, action: str) -> None:
        """`services.sh SERVICE stop|start` (PostgreSQL stops as a crash does: `-m immediate`)."""
        subprocess.run(
            ["bash", str(SERVICES_SCRIPT), service, action, str(self.state)],
            check=True,
            cwd=REPO,
            timeout=SERVICE_TIMEOUT,
            stdout=subprocess.DEVNULL,
        )


@contextlib.contextmanager
def private_services(work: Path, ports: str) -> Iterator[Services]:
    """Services of this run alone (none named by the environment is used), PostgreSQL with fsync on; down
    at the end whatever happens."""
    state = work / "services"
    env = {name: value for name, value in os.environ.items() if name not in SERVICE_NAMES}
    env |= {"JOBMESH_SERVICES_DURABLE": "1", "JOBMESH_SERVICES_PORTS": ports}
    try:
        subprocess.run(
            ["bash", str(SERVICES_SCRIPT), "up", str(state)], check=True, cwd=REPO, env=env, timeout=300
        )
        found = {}
        for line in (state / "env").read_text().splitlines():
            name, _, value = line.removeprefix("export ").partition("=")
            found[name] = value.strip("'\"")
        yield Services(state, {name: found[name] for name in SERVICE_NAMES})
    finally:
        subprocess.run(
            ["bash", str(SERVICES_SCRIPT), "down", str(state)], check=False, cwd=REPO, env=env, timeout=300
        )


# ---------------------------------------------------------------- processes


@dataclass
class Member:
    """One process of the mesh, started again with the same arguments when asked."""

    name: str
    args: list[str]
    extra: dict[str, str]
    health_port: int
    log: Path
    popen: subprocess.Popen[bytes] | None = None
    starts: int = 0

    @property
    def pid(self) -> int:
        assert self.popen is not None
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None


@dataclass
class ChaosMesh:
    work: Path
    env: dict[str, str]
    queue: str
    address: str
    members: dict[str, Member] = field(default_factory=dict)

    def add(self, name: str, args: list[str], extra: dict[str, str], health_port: int) -> Member:
        listen = f"127.0.0.1:{health_port}"
        member = Member(
            name, args, {**extra, "JOBMESH_HEALTH_LISTEN": listen}, health_port, self.work / f"{name}.log"
        )
        self.members[name] = member
        self.start(member)
        return member

    def start(self, member: Member) -> None:
        with member.log.open("ab") as output:
            member.popen = subprocess.Popen(
                [str(BIN / "jobmesh"), *member.args],
                stdout=output,
                stderr=subprocess.STDOUT,
                env={**os.environ, **self.env, **member.extra},
                cwd=REPO,
                start_new_session=True,
            )
        member.starts += 1

    def kill(self, member: Member) -> None:
        """SIGKILL to the process itself (not its group: what a crash of it alone does)."""
        if member.alive():
            os.kill(member.pid, signal.SIGKILL)
            assert member.popen is not None
            member.popen.wait(timeout=30)

    def signal_group(self, member: Member, sig: int) -> None:
        if member.alive():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(member.pid, sig)

    def stop(self) -> None:
        """Continues every process (a fault may have stopped one), then SIGTERM, SIGKILL after 15 s: executors
        first, the server last."""
        for member in self.members.values():
            self.signal_group(member, signal.SIGCONT)
        for member in reversed(self.members.values()):
            self.signal_group(member, signal.SIGTERM)
        deadline = time.monotonic() + 15
        for member in reversed(self.members.values()):
            if member.popen is None:
                continue
            try:
                member.popen.wait(timeout=max(deadline - time.monotonic(), 0.1))
            except subprocess.TimeoutExpired:
                self.signal_group(member, signal.SIGKILL)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    member.popen.wait(timeout=10)

    def dead(self) -> list[str]:
        return [name for name, member in self.members.items() if not member.alive()]

    def tail(self, name: str, chars: int = 3000) -> str:
        return self.members[name].log.read_text(errors="replace")[-chars:]


def children(pid: int) -> list[int]:
    """The live processes whose parent is `pid` (read from /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[1]) == pid and fields[0] not in {"Z", "X"}:
            found.append(int(entry.name))
    return found


def cmdline(pid: int) -> str:
    try:
        return (
            (Path("/proc") / str(pid) / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        )
    except OSError:
        return ""


def server_workers(server_pid: int) -> list[int]:
    """The server's worker processes (multiprocessing's spawned children; its resource tracker aside)."""
    return [
        pid
        for pid in children(server_pid)
        if "multiprocessing" in cmdline(pid) and "resource_tracker" not in cmdline(pid)
    ]


def runs_command(executor_pid: int, marker: str) -> bool:
    """The executor supervises a command whose argv holds `marker` (its supervisor is its child)."""
    return any(marker in cmdline(pid) for pid in children(executor_pid))


# ---------------------------------------------------------------- health


def readyz(port: int, timeout: float = 0.9) -> tuple[int | None, dict[str, Any]]:
    """`/readyz`'s status and body; (None, {}) when nothing answers in time."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=timeout) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as refused:
        with contextlib.suppress(ValueError):
            return refused.code, json.loads(refused.read())
        return refused.code, {}
    except (OSError, ValueError):
        return None, {}


def leading(body: dict[str, Any]) -> bool:
    """A watcher's `/readyz` says it leads (its scans dependency: "scanning", or stale but its own)."""
    for dependency in body.get("dependencies", ()):
        if dependency.get("name") == "scans":
            return bool(dependency.get("detail") != "standing by")
    return False


def not_ready_names(body: dict[str, Any]) -> list[str]:
    return sorted(str(d.get("name")) for d in body.get("dependencies", ()) if not d.get("up"))


GRPC_STATUS = {0: "UNKNOWN", 1: "SERVING", 2: "NOT_SERVING", 3: "SERVICE_UNKNOWN"}


class HealthPoller:
    """Every second, in threads of its own: each member's `/readyz` (200, 503 with the dependencies that are
    down, or no answer) and the server's gRPC health. `samples` holds (epoch s, {name: what it said}). The
    server's workers share its health port (and its gRPC port): each sample is the answer of the worker the
    kernel handed that connection to."""

    def __init__(self, mesh: ChaosMesh, interval: float = 1.0) -> None:
        self._mesh = mesh
        self._interval = interval
        self._stop = threading.Event()
        self.samples: list[tuple[float, dict[str, str]]] = []
        self.leader: str | None = None
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._loop, name="health-poller", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _loop(self) -> None:
        channel = grpc.insecure_channel(self._mesh.address)
        stub = health_pb2_grpc.HealthStub(channel)
        try:
            while not self._stop.is_set():
                began = time.time()
                self._sample(stub, began)
                self._stop.wait(max(self._interval - (time.time() - began), 0.05))
        finally:
            channel.close()

    def _sample(self, stub: health_pb2_grpc.HealthStub, began: float) -> None:
        said: dict[str, str] = {}
        watchers: dict[str, bool] = {}

        def ask(name: str, port: int) -> None:
            status, body = readyz(port)
            if status is None:
                said[name] = "no answer"
            elif status == 200:
                said[name] = "ready"
            else:
                said[name] = f"{status} ({', '.join(not_ready_names(body)) or '?'} down)"
            if name.startswith("watcher"):
                watchers[name] = status is not None and leading(body)

        threads = [
            threading.Thread(target=ask, args=(name, member.health_port), daemon=True)
            for name, member in self._mesh.members.items()
        ]
        for thread in threads:
            thread.start()
        try:
            answer = stub.Check(health_pb2.HealthCheckRequest(), timeout=0.9)
            said["server gRPC"] = GRPC_STATUS.get(int(answer.status), str(answer.status))
        except grpc.RpcError as error:
            said["server gRPC"] = f"no answer ({error.code().name if isinstance(error, grpc.Call) else '?'})"
        for thread in threads:
            thread.join(timeout=2)
        with self._lock:
            self.samples.append((began, dict(said)))
            leaders = [name for name, leads in watchers.items() if leads]
            if leaders:
                self.leader = leaders[0]

    def snapshot(self) -> list[tuple[float, dict[str, str]]]:
        with self._lock:
            return list(self.samples)

    def latest(self, name: str) -> str | None:
        with self._lock:
            for _, said in reversed(self.samples):
                if name in said:
                    return said[name]
        return None


def wait_for(predicate: Callable[[], object], timeout: float, interval: float = 0.2) -> bool:
    """Polls `predicate()` until true (True) or the timeout (False)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return bool(predicate())
