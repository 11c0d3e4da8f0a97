"""The supervisor of one command: a small process between the executor and the command's process tree, so that
no process of the tree outlives the attempt or the executor (docs/design.md, "At least once").

    python -I -S supervise.py CONTROL_FD STATUS_FD [OPTION...] -- PROGRAM [ARG...]

The options (executor/sandbox.py builds them) set up the program's process before it starts:
`--user UID:GID` runs it as that user with no supplementary group, `--limit NAME=VALUE` sets the resource
limit RLIMIT_NAME, and `--signal-exits` says that the program is a wrapper (bubblewrap) that reports
its child's death by signal N as exit code 128 + N. The program always starts with `no_new_privs`.

It makes itself a child subreaper (Linux `PR_SET_CHILD_SUBREAPER`): a descendant whose parent exits, one that
called `setsid` included, is re-parented to it rather than to init, so the whole tree stays its descendants.
It starts the program, then kills the whole tree:
- when the program exits (leftovers would hold the output pipes and the machine's resources);
- when the executor writes `TERM` (SIGTERM to every descendant) or `KILL` (SIGKILL) on CONTROL_FD;
- when CONTROL_FD reaches end of file: the executor is gone, however it died (even SIGKILL).
Last it writes one line on STATUS_FD: `exit N`, `signal N` or `spawn-error MESSAGE`, and exits.

Standard library only, started with `-I -S`: it must start fast and depend on nothing but the interpreter.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import resource
import select
import signal
import subprocess
import sys
import time

PR_SET_CHILD_SUBREAPER = 36
PR_SET_NO_NEW_PRIVS = 38
KILL_ROUNDS = 200  # a tree that keeps forking while being killed gets this many sweeps, 5 ms apart


def descendants(root: int) -> list[int]:
    """Every live process below `root`, read from /proc (children, then theirs, ...)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as stat:
                fields = stat.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue  # gone meanwhile
        children.setdefault(int(fields[1]), []).append(int(entry))  # fields[1] is the parent's pid
    found, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def signal_tree(signum: int) -> int:
    """Sends `signum` to every descendant; how many there were."""
    pids = descendants(os.getpid())
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signum)
    return len(pids)


def reap() -> dict[int, int]:
    """Collects every exited child: pid → wait status."""
    statuses: dict[int, int] = {}
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return statuses
        if pid == 0:
            return statuses
        statuses[pid] = status


def kill_tree() -> None:
    """SIGKILL until no descendant is left (one forking meanwhile is caught by the next round)."""
    for _ in range(KILL_ROUNDS):
        reap()
        if not signal_tree(signal.SIGKILL):
            return
        time.sleep(0.005)


def report(status_fd: int, line: str) -> None:
    with contextlib.suppress(OSError):
        os.write(status_fd, (line + "\n").encode("utf-8", "replace"))


def status_line(status: int, signal_exits: bool) -> str:
    if os.WIFSIGNALED(status):
        return f"signal {os.WTERMSIG(status)}"
    code = os.waitstatus_to_exitcode(status)
    if signal_exits and 128 < code < 128 + signal.NSIG:
        return f"signal {code - 128}"
    return f"exit {code}"


class Options:
    """The options before `--`: who the program runs as, its limits, how its exit code reads."""

    def __init__(self, args: list[str]) -> None:
        self.uid: int | None = None
        self.gid: int | None = None
        self.limits: list[tuple[int, int]] = []
        self.signal_exits = False
        given = iter(args)
        for option in given:
            if option == "--signal-exits":
                self.signal_exits = True
            elif option == "--user":
                uid, gid = next(given).split(":")
                self.uid, self.gid = int(uid), int(gid)
            elif option == "--limit":
                name, value = next(given).split("=")
                self.limits.append((getattr(resource, f"RLIMIT_{name}"), int(value)))
            else:
                raise ValueError(f"unknown option {option!r}")

    def prepare(self) -> None:
        """In the child, before exec (after the user switch): the limits and no_new_privs."""
        for limit, value in self.limits:  # CPU: SIGXCPU at the limit, SIGKILL a second later
            resource.setrlimit(limit, (value, value + 1 if limit == resource.RLIMIT_CPU else value))
        if ctypes.CDLL(None, use_errno=True).prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")


def supervise(control_fd: int, status_fd: int, argv: list[str], options: Options) -> None:
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    wakeup_r, wakeup_w = os.pipe()
    os.set_blocking(wakeup_w, False)
    signal.set_wakeup_fd(wakeup_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)  # the wakeup fd does the work
    # Signalled itself (by an operator, say), it passes the signal on rather than leave the tree orphaned.
    # Handlers, unlike an ignored disposition, are not inherited by the program it execs.
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, lambda received, _: signal_tree(received))
    try:
        child = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            close_fds=True,
            user=options.uid,
            group=options.gid,
            extra_groups=[] if options.uid is not None else None,
            preexec_fn=options.prepare,  # noqa: PLW1509 - this process has one thread
        )
    except (OSError, ValueError, subprocess.SubprocessError) as exc:
        detail = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        report(status_fd, f"spawn-error {detail}")
        return
    result = _watch(child.pid, control_fd, wakeup_r, options.signal_exits)
    kill_tree()
    report(status_fd, result)


def _watch(child: int, control_fd: int, wakeup_fd: int, signal_exits: bool) -> str:
    """Waits for the program to exit, obeying the executor meanwhile: the program's status line."""
    pending = b""
    while True:
        for pid, status in reap().items():
            if pid == child:
                return status_line(status, signal_exits)
        readable, _, _ = select.select([control_fd, wakeup_fd], [], [])
        if wakeup_fd in readable:
            os.read(wakeup_fd, 512)
        if control_fd in readable:
            data = os.read(control_fd, 512)
            if not data:
                kill_tree()  # the executor is gone: nothing may outlive it
                return "signal 9"
            pending += data
            *commands, pending = pending.split(b"\n")
            for command in commands:
                signal_tree(signal.SIGKILL if command == b"KILL" else signal.SIGTERM)


def main(args: list[str]) -> int:
    end = args.index("--") if "--" in args else -1
    if end < 2 or end == len(args) - 1:
        print("usage: supervise.py CONTROL_FD STATUS_FD [OPTION...] -- PROGRAM [ARG...]", file=sys.stderr)
        return 2
    supervise(int(args[0]), int(args[1]), args[end + 1 :], Options(args[2:end]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
