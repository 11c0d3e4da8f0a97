"""A peer's load: one sender process, in the peers venv, offering jobs at a fixed rate by the wall clock.

    python -m benchmarks.peers.sender PLAN_JSON     (started by `python -m benchmarks.peers`)

Paced as jobmesh's load (`benchmarks/load.py`): job `n` (0 <= n < rate * duration) is offered at
`t0 + n / rate`, sender `i` of `k` offers those with `n % k == i`, and every `tick` seconds it sends, one
enqueue call each, the jobs of its share whose instant has come (`tick` 0: each at its own instant). A slow
peer cannot slow the offered load beyond the enqueue calls themselves, and each job's submit instant is
taken just before its own call, so the sender's lag is not counted as the peer's.

Talks to the benchmark in lines: says `ready` once its peer's client is set up; `warm K` enqueues K warm-up
jobs (negative numbers) and answers `warmed`; `go T0` offers its share from T0 (epoch seconds), writes one
line per job to its output (`n offered_ns submit_ns ok`, ok 0 when the enqueue call raised) and says
`done SENT ERRORS`; then it waits for `exit` (so that its CPU time can be read) and exits. Standard library
and the peer's module only.
"""

from __future__ import annotations

import importlib
import json
import math
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TextIO, cast


@dataclass(frozen=True, slots=True)
class Plan:
    module: str  # the peer's module, with a `sender()` context manager yielding `submit(n)`
    rate: float
    duration: float
    tick: float
    senders: int
    index: int
    output: str

    @property
    def total(self) -> int:
        return round(self.rate * self.duration)


Submit = Callable[[int], None]


def send_instant(t0: float, n: int, plan: Plan) -> float:
    """When job n goes out: its offered instant, or the first tick at or after it."""
    offered = n / plan.rate
    if plan.tick <= 0:
        return t0 + offered
    return t0 + math.ceil(offered / plan.tick - 1e-9) * plan.tick


def offer(plan: Plan, submit: Submit, t0: float) -> tuple[list[str], int]:
    """Offers this sender's share; returns its record lines and how many enqueue calls raised."""
    t0_ns = round(t0 * 1e9)
    lines, errors = [], 0
    for n in range(plan.index, plan.total, plan.senders):
        delay = send_instant(t0, n, plan) - time.time()
        if delay > 0:
            time.sleep(delay)
        submit_ns = time.time_ns()
        try:
            submit(n)
            ok = 1
        except Exception:  # counted, not fatal: a job the peer refused is a job that did not start
            ok, errors = 0, errors + 1
            if errors == 1:
                traceback.print_exc()
        lines.append(f"{n} {t0_ns + round(n * 1e9 / plan.rate)} {submit_ns} {ok}\n")
    return lines, errors


def commands(source: TextIO) -> Iterator[list[str]]:
    for line in source:
        if words := line.split():
            yield words


def say(*words: object) -> None:
    print(*words, flush=True)


def serve(plan: Plan, submit: Submit) -> None:
    warmed = 0
    say("ready")
    for words in commands(sys.stdin):
        if words[0] == "warm":
            for _ in range(int(words[1])):  # numbered -1, -2, ... over all senders, none twice
                submit(-(1 + plan.index + plan.senders * warmed))
                warmed += 1
            say("warmed")
        elif words[0] == "go":
            lines, errors = offer(plan, submit, float(words[1]))
            with open(plan.output, "w", encoding="utf-8") as out:
                out.write("".join(lines))
            say("done", len(lines) - errors, errors)
        elif words[0] == "exit":
            return


def main() -> int:
    plan = Plan(**json.loads(sys.argv[1]))
    module = importlib.import_module(plan.module)
    sending = cast(Callable[[], AbstractContextManager[Submit]], module.sender)
    with sending() as submit:
        serve(plan, submit)
    return 0


if __name__ == "__main__":
    sys.exit(main())
