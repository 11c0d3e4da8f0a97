"""CPU time of process trees, from /proc (Linux): utime + stime of every live process in the tree, plus the
cutime + cstime its members hold for children they have reaped (PostgreSQL's backends that came and went).

The difference of two `snapshot()`s is the CPU a tree used between them: a member that exited meanwhile is
counted in its parent's cutime once reaped, one that appeared is counted whole.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

TICKS = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True, slots=True)
class ProcStat:
    pid: int
    ppid: int
    own: float  # utime + stime, seconds
    reaped: float  # cutime + cstime, seconds


def read_stat(pid: int) -> ProcStat | None:
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # the command may contain spaces and parentheses: fields resume after the last ')'
    fields = raw.rsplit(")", 1)[1].split()
    state, ppid = fields[0], int(fields[1])
    if state in ("Z", "X"):
        return None
    utime, stime, cutime, cstime = (int(value) for value in fields[11:15])
    return ProcStat(pid, ppid, (utime + stime) / TICKS, (cutime + cstime) / TICKS)


def all_stats() -> dict[int, ProcStat]:
    stats = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit() and (stat := read_stat(int(entry.name))) is not None:
            stats[stat.pid] = stat
    return stats


def tree(root: int, stats: Mapping[int, ProcStat], exclude: Iterable[int] = ()) -> set[int]:
    """`root` and its live descendants, without the subtrees rooted at `exclude`."""
    children: dict[int, list[int]] = {}
    for stat in stats.values():
        children.setdefault(stat.ppid, []).append(stat.pid)
    skip = set(exclude)
    members: set[int] = set()
    todo = [root] if root in stats else []
    while todo:
        pid = todo.pop()
        if pid in members or pid in skip:
            continue
        members.add(pid)
        todo.extend(children.get(pid, ()))
    return members


@dataclass(frozen=True, slots=True)
class Group:
    """What one row of the CPU table measures: process trees by root pid (`own_only`: the roots alone, not
    their descendants nor what they reaped, for the load generator whose children are the mesh)."""

    name: str
    roots: tuple[int, ...]
    own_only: bool = False


def snapshot(groups: Iterable[Group], exclude: Iterable[int] = ()) -> dict[str, float]:
    """CPU seconds used so far by each group."""
    stats = all_stats()
    exclude = set(exclude)
    totals: dict[str, float] = {}
    for group in groups:
        seconds = 0.0
        for root in group.roots:
            if group.own_only:
                stat = stats.get(root)
                seconds += stat.own if stat is not None else 0.0
                continue
            for pid in tree(root, stats, exclude):
                seconds += stats[pid].own + stats[pid].reaped
        totals[group.name] = seconds
    return totals


def machine_jiffies() -> tuple[int, int]:
    """(busy, all) clock ticks of every CPU since boot, from /proc/stat: busy is all but idle and iowait."""
    fields = [int(value) for value in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    total = sum(fields[:8])  # user nice system idle iowait irq softirq steal (guest is inside user)
    return total - fields[3] - fields[4], total
