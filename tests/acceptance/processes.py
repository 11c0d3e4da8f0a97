"""Spawning jobmesh processes for acceptance tests: real subprocesses, stopped and reaped afterwards."""

from __future__ import annotations

import contextlib
import itertools
import os
import random
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from jobmesh.transport.tls import ChannelTls
from jobmesh.transport.tls import channel as channel_to
from tests.support import environment_without_services

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


# Ports for the processes a test starts come from below the kernel's ephemeral range (32768-60999 here),
# each xdist worker from a block of its own: a port the kernel hands out for `bind(0)`, as the suite's
# in-process servers ask, can otherwise be taken between the pick and the process's own bind (that process
# then fails with "port taken", and a connection reaches the other server). The services' ports lie outside
# the blocks.
_PORT_BLOCK = 1000
_FIRST_PORT = 10_000
_WORKER = int(os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw") or 0) % 10
_BLOCK = range(_FIRST_PORT + _WORKER * _PORT_BLOCK, _FIRST_PORT + (_WORKER + 1) * _PORT_BLOCK)
_START = random.randrange(_PORT_BLOCK)  # each run of a worker starts elsewhere in its block
_ports: Iterator[int] = itertools.cycle([*_BLOCK[_START:], *_BLOCK[:_START]])


def free_port() -> int:
    """A loopback port nothing listens on, from this worker's block."""
    for port in itertools.islice(_ports, _PORT_BLOCK):
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port in {_BLOCK}")


class ProcessExited(AssertionError):
    """The process a test waits for ended before it served."""


def wait_serving(
    address: str,
    timeout: float = 30.0,
    tls: ChannelTls | None = None,
    process: subprocess.Popen[bytes] | None = None,
) -> None:
    """Waits until `address` answers SERVING; a `process` that exits first fails at once, not at the deadline
    (something else may be answering on its port)."""
    deadline = time.monotonic() + timeout
    with channel_to(address, tls) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        while True:
            if process is not None and process.poll() is not None:
                raise ProcessExited(f"the process serving {address} exited with {process.returncode}")
            try:
                response = stub.Check(health_pb2.HealthCheckRequest(), timeout=1)
                if response.status == health_pb2.HealthCheckResponse.SERVING:
                    return
            except grpc.RpcError:
                if time.monotonic() > deadline:
                    raise
            time.sleep(0.1)


@contextlib.contextmanager
def jobmesh_process(
    args: Sequence[str],
    address: str,
    log: Path,
    env: dict[str, str] | None = None,
    tls: ChannelTls | None = None,
) -> Iterator[subprocess.Popen[bytes]]:
    """Runs `jobmesh ARGS`, waits until it serves on `address` (over `tls` when given), and stops it with
    SIGINT afterwards. It sees none of the suite's `JOBMESH_*` variables (the services `make test` started):
    `jobmesh dev` runs on its embedded default, as `make run` starts it; `env` adds what a test means."""
    inherited = environment_without_services()
    with log.open("wb") as output:
        process = subprocess.Popen(
            [str(BIN / "jobmesh"), *args],
            stdout=output,
            stderr=subprocess.STDOUT,
            env={**inherited, **(env or {})},
            cwd=REPO,
            start_new_session=True,
        )
        try:
            try:
                wait_serving(address, tls=tls, process=process)
            except (grpc.RpcError, ProcessExited):
                raise AssertionError(f"jobmesh did not start:\n{log.read_text()}") from None
            yield process
        finally:
            if process.poll() is None:
                process.send_signal(signal.SIGINT)
                try:
                    process.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    os.killpg(process.pid, signal.SIGKILL)
                    process.wait()
