"""The metric names a PromQL expression of deploy/ may name: those `core.metrics` defines, with the suffixes
the exposition gives each type."""

from __future__ import annotations

import re

from jobmesh.core.metrics import ALL_METRICS

_SUFFIXES = {"counter": ("_total",), "histogram": ("_bucket", "_count", "_sum"), "gauge": ("",)}
EXPOSED = frozenset(
    f"{name}{suffix}" for name, metric in ALL_METRICS.items() for suffix in _SUFFIXES[str(metric._type)]
)
_NAME = re.compile(r"\bjobmesh_[a-zA-Z0-9_]+")


def names_in(expr: str) -> set[str]:
    """The jobmesh metric names an expression reads."""
    return set(_NAME.findall(expr))
