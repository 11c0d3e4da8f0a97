"""The hook chain: one place where every hop of a run can be observed (tracing, metrics, logs, later limits).

The hops, in a run's order, and who calls them:
- `create`: the server, once a create call has stored its runs; the watcher, once it has made cron
  occurrences into runs;
- `dispatch`: the dispatcher (server bypass or watcher), just before the runs' messages are published. A hook
  may write each message's `trace_context`: it travels with the run (and in its Kafka headers);
- `consume`: an executor, for the runs it took from the queue;
- `claim`: the executor, once the server has answered their claims;
- `start`: the executor, as an attempt's target starts. A hook may write the run's `trace_context` again: the
  target sees it (`TRACEPARENT` for a command);
- `report`: the executor, as it reports an attempt's result (None: fenced, nothing is reported);
- `end`: the server or the watcher's sweeper, once the attempts' ends are written.

Every call is made once per batch with what the hop already holds, so the default, `NO_HOOKS`, costs one
call that does nothing: no span, no context, no allocation. Like dramatiq's middleware, a hook subclasses
`RunHooks` and overrides the hops it needs; `chain` puts several behind one. A hook runs on the hop's own
thread or event loop: it must not block, and an exception it raises is the hop's.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from jobmesh.control.v1 import dispatch_pb2
from jobmesh.control.v1 import executor_control_pb2 as pb
from jobmesh.core.attempts import AttemptEnd, AttemptRef, Dispatchable
from jobmesh.core.ports.queue import Delivery
from jobmesh.core.records import JobRecord, RunRecord


class RunHooks:
    """Observes the hops of runs; each method does nothing unless overridden."""

    def create(
        self, call: str, start_ns: int, runs: Sequence[RunRecord], jobs: Sequence[JobRecord] = ()
    ) -> None:
        """`runs` (and `jobs`) were stored by `call` (an RPC's full name, or the watcher's step), which began
        at `start_ns` (`time.time_ns()`)."""

    def dispatch(self, runs: Sequence[dispatch_pb2.DispatchedRun]) -> None:
        """`runs` are about to be published."""

    def consume(self, deliveries: Sequence[Delivery]) -> None:
        """An executor took `deliveries` from the queue and is about to claim them."""

    def claim(self, runs: Sequence[dispatch_pb2.DispatchedRun], granted: Collection[AttemptRef]) -> None:
        """The server answered the claims of `runs`; those in `granted` will start, the others are skipped."""

    def start(self, run: dispatch_pb2.DispatchedRun) -> None:
        """The attempt's target starts now."""

    def report(self, run: dispatch_pb2.DispatchedRun, result: pb.AttemptResult | None) -> None:
        """The attempt ended and `result` goes to the server; None when it was fenced (nothing is sent)."""

    def end(self, ended: Sequence[tuple[Dispatchable, AttemptEnd]]) -> None:
        """The ends of these attempts were written: each run as it was, and what became of it."""

    def close(self) -> None:
        """The process stops: whatever the hook holds is flushed (a tracer exports its last spans)."""


NO_HOOKS = RunHooks()


class HookChain(RunHooks):
    """Several hooks behind one, called in order at every hop."""

    def __init__(self, hooks: Sequence[RunHooks]) -> None:
        self.hooks = tuple(hooks)

    def create(
        self, call: str, start_ns: int, runs: Sequence[RunRecord], jobs: Sequence[JobRecord] = ()
    ) -> None:
        for hook in self.hooks:
            hook.create(call, start_ns, runs, jobs)

    def dispatch(self, runs: Sequence[dispatch_pb2.DispatchedRun]) -> None:
        for hook in self.hooks:
            hook.dispatch(runs)

    def consume(self, deliveries: Sequence[Delivery]) -> None:
        for hook in self.hooks:
            hook.consume(deliveries)

    def claim(self, runs: Sequence[dispatch_pb2.DispatchedRun], granted: Collection[AttemptRef]) -> None:
        for hook in self.hooks:
            hook.claim(runs, granted)

    def start(self, run: dispatch_pb2.DispatchedRun) -> None:
        for hook in self.hooks:
            hook.start(run)

    def report(self, run: dispatch_pb2.DispatchedRun, result: pb.AttemptResult | None) -> None:
        for hook in self.hooks:
            hook.report(run, result)

    def end(self, ended: Sequence[tuple[Dispatchable, AttemptEnd]]) -> None:
        for hook in self.hooks:
            hook.end(ended)

    def close(self) -> None:
        for hook in self.hooks:
            hook.close()


def chain(*hooks: RunHooks) -> RunHooks:
    """The hooks as one: `NO_HOOKS` when there are none (so that an unobserved hop costs nothing more), the
    hook itself when there is one."""
    present = [hook for hook in hooks if hook is not NO_HOOKS]
    if not present:
        return NO_HOOKS
    return present[0] if len(present) == 1 else HookChain(present)
