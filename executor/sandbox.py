"""How a command is kept apart from its executor: the user it runs as, the namespaces it sees, its limits.

A command runs as the job user (`nobody` when the executor is root, unless configured), never with more
privileges than that user has (`no_new_privs`: no setuid program raises them), and with per-job limits
(address space, CPU time, processes of the job user, file size, no core dumps). The isolation modes:

- `bwrap` (bubblewrap): besides, a PID namespace of its own and a mount namespace with a fresh `/proc` and a
  minimal `/dev`, so that no process outside the sandbox is visible (the executor's `/proc/PID/environ` least
  of all), and the executor's own credential files (token, TLS key, secrets file) unreadable whatever their
  mode; its own IPC and UTS namespaces.
  The rest of the file system is the host's, seen with the job user's permissions; the network is the host's.
- `user`: the user, `no_new_privs` and the limits only: other processes stay visible in `/proc` (those of the
  job user readable: other jobs'), so it is the fallback where the kernel forbids namespaces.
- `auto` (the default): `bwrap` when it works here, else `user` with a warning at start.
"""

from __future__ import annotations

import functools
import logging
import os
import pwd
import shutil
import stat
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from jobmesh.core.errors import InvalidConfig

__all__ = ["ISOLATION_MODES", "JobLimits", "JobUser", "Sandbox", "job_user", "open_sandbox", "try_bubblewrap"]

log = logging.getLogger(__name__)

AUTO, BWRAP, USER = "auto", "bwrap", "user"
ISOLATION_MODES = (AUTO, BWRAP, USER)
DEFAULT_JOB_USER = "nobody"  # when the executor is root
PROBE_TIMEOUT = 10.0
GiB = 2**30
DEFAULT_MEMORY, DEFAULT_CPU_SECONDS, DEFAULT_PROCESSES, DEFAULT_FILE_SIZE = 4 * GiB, 3600, 1024, GiB


@dataclass(frozen=True, slots=True)
class JobLimits:
    """Per job (0: none). `processes` counts every process of the job user, its other jobs' included."""

    memory: int = DEFAULT_MEMORY  # address space (RLIMIT_AS)
    cpu_seconds: int = DEFAULT_CPU_SECONDS  # RLIMIT_CPU
    processes: int = DEFAULT_PROCESSES  # RLIMIT_NPROC
    file_size: int = (
        DEFAULT_FILE_SIZE  # the largest file it may write (RLIMIT_FSIZE); its log has its own budget
    )

    def supervisor_options(self) -> list[str]:
        """The supervisor's `--limit NAME=VALUE` options; a core dump (which could hold secrets) never."""
        limits = {
            "AS": self.memory,
            "CPU": self.cpu_seconds,
            "NPROC": self.processes,
            "FSIZE": self.file_size,
        }
        options = ["--limit", "CORE=0"]
        for name, value in limits.items():
            if value > 0:
                options += ["--limit", f"{name}={value}"]
        return options


@dataclass(frozen=True, slots=True)
class JobUser:
    name: str
    uid: int
    gid: int
    home: str


def job_user(spec: str) -> JobUser | None:
    """The user commands run as: `spec` (a name or a uid), or by default `nobody` when this process is root.
    None: this process's own user (one that is not root can switch to no other)."""
    if not spec:
        if os.geteuid() != 0:
            return None
        spec = DEFAULT_JOB_USER
    try:
        entry = pwd.getpwuid(int(spec)) if spec.isdigit() else pwd.getpwnam(spec)
    except KeyError:
        raise InvalidConfig("job_user", f"no user {spec!r} on this machine") from None
    if entry.pw_uid == os.geteuid():
        return None
    if os.geteuid() != 0:
        raise InvalidConfig("job_user", f"only an executor running as root can run commands as {spec!r}")
    return JobUser(entry.pw_name, entry.pw_uid, entry.pw_gid, entry.pw_dir)


@dataclass(frozen=True, slots=True)
class Sandbox:
    """A resolved isolation: `mode` is `bwrap` or `user`."""

    mode: str
    user: JobUser | None
    limits: JobLimits
    bwrap: str = ""  # the program, in `bwrap` mode
    hidden: tuple[str, ...] = ()  # files the command must not read (the executor's credentials)

    def supervisor_options(self) -> list[str]:
        options = self.limits.supervisor_options()
        if self.user is not None:
            options += ["--user", f"{self.user.uid}:{self.user.gid}"]
        if self.mode == BWRAP:  # bwrap reports its child's death by signal N as exit code 128 + N
            options.append("--signal-exits")
        return options

    def wrap(self, argv: Sequence[str], working_dir: str) -> list[str]:
        """The argv that starts `argv` isolated (unchanged in `user` mode)."""
        if self.mode != BWRAP:
            return list(argv)
        wrapped = [self.bwrap, "--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts"]
        wrapped += ["--unshare-cgroup-try", "--die-with-parent", "--new-session"]
        wrapped += ["--bind", "/", "/", "--proc", "/proc", "--dev", "/dev"]
        # /dev/null bound on a nodev mount: any open is refused. PID 1 is bubblewrap's own, the command's
        # parent: its environment is the command's, but a read of it should fail as any other process's.
        for path in (*self.hidden, "/proc/1/environ"):
            wrapped += ["--ro-bind", "/dev/null", path]
        if working_dir:
            wrapped += ["--chdir", os.path.abspath(working_dir)]
        return [*wrapped, "--", *argv]

    def environment(self) -> dict[str, str]:
        """What the job user's environment holds of its own: its HOME."""
        return {} if self.user is None else {"HOME": self.user.home}

    def describe(self) -> str:
        who = f"as {self.user.name} (uid {self.user.uid})" if self.user else f"as uid {os.geteuid()}"
        if self.mode == BWRAP:
            return f"runs commands {who} in a bubblewrap sandbox (own PID and mount namespaces, no_new_privs)"
        return f"runs commands {who} with no_new_privs, WITHOUT namespaces: other processes are visible"


def open_sandbox(mode: str, user: str, limits: JobLimits, hidden: Sequence[str]) -> Sandbox:
    """`auto` becomes `bwrap` when bubblewrap works here (tried once per process), else `user` with a loud
    warning; `bwrap` that does not work is InvalidConfig."""
    if mode not in ISOLATION_MODES:
        raise InvalidConfig("isolation", f"expected one of {', '.join(ISOLATION_MODES)}, got {mode!r}")
    runs_as = job_user(user)
    masked = tuple(sorted({os.path.abspath(path) for path in hidden if _reachable(path, runs_as)}))
    if mode == USER:
        return Sandbox(USER, runs_as, limits)
    program, problem = _bwrap_works(runs_as)
    if program:
        return Sandbox(BWRAP, runs_as, limits, program, masked)
    if mode == BWRAP:
        raise InvalidConfig("isolation", f"bubblewrap cannot isolate commands here: {problem}")
    log.warning(
        "COMMANDS ARE NOT ISOLATED FROM THIS EXECUTOR: %s. They run as %s with no_new_privs and limits, but"
        " see every process in /proc; install bubblewrap (apt-get install bubblewrap) and allow user"
        " namespaces, or set --isolation user to accept this",
        problem,
        runs_as.name if runs_as else "this executor's user",
    )
    return Sandbox(USER, runs_as, limits)


def try_bubblewrap(mode: str, user: str) -> None:
    """Tries bubblewrap now, for `open_sandbox` to find the answer later (it is tried once per process): a
    process that is about to start gRPC calls this first, as a fork beside gRPC's threads can fail."""
    if mode in ISOLATION_MODES and mode != USER:
        _bwrap_works(job_user(user))


def _reachable(path: str, user: JobUser | None) -> bool:
    """Whether `user` (None: this process's) could reach the file: only those need hiding (bubblewrap cannot
    mount over a file in a folder the user may not enter)."""
    if not os.path.exists(path):
        return False
    if user is None:
        return True
    for folder in Path(os.path.abspath(path)).parents:
        mode = folder.stat()
        if not (
            mode.st_mode & stat.S_IXOTH
            or (mode.st_uid == user.uid and mode.st_mode & stat.S_IXUSR)
            or (mode.st_gid == user.gid and mode.st_mode & stat.S_IXGRP)
        ):
            return False
    return True


@functools.cache
def _bwrap_works(user: JobUser | None) -> tuple[str, str]:
    """(bwrap's path, "") when a sandbox starts here as `user`; ("", why not) otherwise."""
    program = shutil.which("bwrap")
    if program is None:
        return "", "bubblewrap (bwrap) is not installed"
    probe = Sandbox(BWRAP, user, JobLimits(), program).wrap(["/bin/true"], "")
    uid, gid = (user.uid, user.gid) if user is not None else (None, None)
    groups: list[int] | None = [] if user is not None else None
    try:
        subprocess.run(
            probe,
            capture_output=True,
            timeout=PROBE_TIMEOUT,
            check=True,
            env={},
            user=uid,
            group=gid,
            extra_groups=groups,
        )
    except subprocess.CalledProcessError as exc:
        return "", f"bwrap failed ({exc.stderr.decode(errors='replace').strip() or exc.returncode})"
    except (OSError, subprocess.SubprocessError) as exc:  # a timeout, or a child that failed before exec
        return "", f"bwrap failed ({exc})"
    return program, ""
