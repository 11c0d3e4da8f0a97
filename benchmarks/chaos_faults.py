"""The chaos run's faults, each one a function that does it, lifts it and says when it began and ended.

- `executor`: SIGKILL of an executor while it runs a long command (two are submitted for it), started again;
- `watcher`: SIGKILL of the leading watcher, started again;
- `worker`: SIGKILL of one server worker (the server's parent starts another);
- `kafka`, `redis`: the service stopped for `--kafka-down` / `--redis-down` seconds, then started again;
- `postgres`: PostgreSQL stopped as a crash stops it (`-m immediate`) for `--postgres-down` seconds;
- `sigstop`: the server, parent and workers, SIGSTOPped for `--server-stop` seconds, then continued.

A window runs from the instant the fault began to the instant it was lifted: the process started again and
ready (its `/readyz` 200; for a worker, its parent serving with all its workers again), or the service back
(`services.sh ... start` returned, which waits for it to answer). Every wait is bounded.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from benchmarks.chaos_mesh import (
    ChaosMesh,
    HealthPoller,
    Services,
    leading,
    readyz,
    runs_command,
    server_workers,
    wait_for,
)

FAULTS = ("executor", "watcher", "worker", "kafka", "redis", "postgres", "sigstop")
LONG_MARKER = "chaos-long"  # in every long command's argv
RESTART_AFTER = 3.0  # seconds a killed process stays dead before it is started again
READY_TIMEOUT = 90.0


@dataclass
class FaultContext:
    mesh: ChaosMesh
    services: Services
    poller: HealthPoller
    submit_long: Callable[[int], None]  # submits that many long commands now
    lengths: dict[str, float]  # fault -> seconds it lasts (kafka, redis, postgres, sigstop)


@dataclass
class Fault:
    name: str
    start_ns: int = 0
    end_ns: int = 0
    notes: list[str] = field(default_factory=list)

    def record(self) -> dict[str, Any]:
        return {"name": self.name, "start_ns": self.start_ns, "end_ns": self.end_ns, "notes": self.notes}


def run_fault(name: str, context: FaultContext) -> Fault:
    fault = Fault(name)
    {
        "executor": _kill_executor,
        "watcher": _kill_leading_watcher,
        "worker": _kill_server_worker,
        "kafka": _stop_service,
        "redis": _stop_service,
        "postgres": _stop_service,
        "sigstop": _stop_server,
    }[name](fault, context)
    if not fault.end_ns:
        fault.end_ns = time.time_ns()
    return fault


def _ready(context: FaultContext, name: str) -> bool:
    return readyz(context.mesh.members[name].health_port)[0] == 200


def _restart(fault: Fault, context: FaultContext, name: str) -> None:
    time.sleep(RESTART_AFTER)
    member = context.mesh.members[name]
    context.mesh.start(member)
    if wait_for(lambda: _ready(context, name), READY_TIMEOUT, 0.1):
        fault.notes.append(f"{name} started again, ready {(time.time_ns() - fault.start_ns) / 1e9:.1f} s in")
    else:
        fault.notes.append(f"{name} started again, not ready after {READY_TIMEOUT:.0f} s")


def _kill_executor(fault: Fault, context: FaultContext) -> None:
    context.submit_long(2)
    executors = [name for name in context.mesh.members if name.startswith("executor")]
    chosen: list[str] = []

    def running_one() -> bool:
        chosen[:] = [
            name
            for name in executors
            if context.mesh.members[name].alive()
            and runs_command(context.mesh.members[name].pid, LONG_MARKER)
        ]
        return bool(chosen)

    if not wait_for(running_one, 60, 0.2):
        chosen[:] = executors[:1]
        fault.notes.append("no executor ran a long command within 60 s: the first one killed all the same")
    name = chosen[0]
    time.sleep(1.0)  # the command has started and stamped
    fault.start_ns = time.time_ns()
    context.mesh.kill(context.mesh.members[name])
    fault.notes.append(f"SIGKILL {name}")
    _restart(fault, context, name)


def _leader(context: FaultContext) -> str | None:
    for name, member in context.mesh.members.items():
        if name.startswith("watcher") and member.alive():
            status, body = readyz(member.health_port)
            if status is not None and leading(body):
                return name
    return None


def _kill_leading_watcher(fault: Fault, context: FaultContext) -> None:
    found: list[str | None] = [None]

    def led() -> bool:
        found[0] = _leader(context)
        return found[0] is not None

    if not wait_for(led, 30, 0.5):
        fault.notes.append("no watcher said it led within 30 s: watcher-1 killed")
    name = found[0] or "watcher-1"
    fault.start_ns = time.time_ns()
    context.mesh.kill(context.mesh.members[name])
    fault.notes.append(f"SIGKILL {name} (leading)")
    took_over = wait_for(lambda: _leader(context) not in {None, name}, 60, 0.2)
    if took_over:
        fault.notes.append(f"{_leader(context)} leads {(time.time_ns() - fault.start_ns) / 1e9:.1f} s in")
    else:
        fault.notes.append("no other watcher led within 60 s")
    if not context.mesh.members[name].alive():
        # it is started again RESTART_AFTER after the kill at the earliest, the takeover waited for
        left = RESTART_AFTER - (time.time_ns() - fault.start_ns) / 1e9
        time.sleep(max(left, 0.0))
        context.mesh.start(context.mesh.members[name])
        ready = wait_for(lambda: _ready(context, name), READY_TIMEOUT, 0.1)
        fault.notes.append(
            f"{name} started again, {'ready' if ready else 'NOT ready'} "
            f"{(time.time_ns() - fault.start_ns) / 1e9:.1f} s in"
        )


def _kill_server_worker(fault: Fault, context: FaultContext) -> None:
    server = context.mesh.members["server"]
    workers = server_workers(server.pid)
    if not workers:
        fault.notes.append("no server worker found: nothing killed")
        return
    victim = workers[0]
    fault.start_ns = time.time_ns()
    os.kill(victim, signal.SIGKILL)
    fault.notes.append(f"SIGKILL server worker pid {victim} (of {len(workers)})")
    back = wait_for(
        lambda: (
            len(set(server_workers(server.pid)) - {victim}) >= len(workers)
            and context.poller.latest("server gRPC") == "SERVING"
        ),
        60,
        0.1,
    )
    took = (time.time_ns() - fault.start_ns) / 1e9
    fault.notes.append(f"{'all workers back' if back else 'workers NOT all back'} {took:.1f} s in")


def _stop_service(fault: Fault, context: FaultContext) -> None:
    length = context.lengths[fault.name]
    fault.start_ns = time.time_ns()
    context.services.control(fault.name, "stop")
    stopped = (time.time_ns() - fault.start_ns) / 1e9
    fault.notes.append(f"{fault.name} stopped ({stopped:.1f} s to stop)")
    time.sleep(max(length - stopped, 0.0))
    began = time.time_ns()
    context.services.control(fault.name, "start")
    fault.notes.append(f"{fault.name} back ({(time.time_ns() - began) / 1e9:.1f} s to start)")


def _stop_server(fault: Fault, context: FaultContext) -> None:
    server = context.mesh.members["server"]
    fault.start_ns = time.time_ns()
    context.mesh.signal_group(server, signal.SIGSTOP)
    try:
        time.sleep(context.lengths["sigstop"])
    finally:
        context.mesh.signal_group(server, signal.SIGCONT)
    fault.notes.append(f"server and its workers SIGSTOPped {context.lengths['sigstop']:g} s")
