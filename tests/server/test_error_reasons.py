"""`jobmesh.v1.ErrorReason` (protos/jobmesh/v1/errors.proto) lists exactly the `ErrorInfo` reasons the server
sends: every reason an error type carries or a refusal names is one of its values (without the prefix), and
every value is sent somewhere."""

from __future__ import annotations

import ast
import functools
import importlib
import pkgutil
from pathlib import Path

import jobmesh.core
import jobmesh.server
from jobmesh.core.errors import JobmeshError
from jobmesh.v1 import errors_pb2

REPO = Path(__file__).resolve().parents[2]
PREFIX = "ERROR_REASON_"
# The error types whose reason each raise names (`reason=`): their own default is never sent.
NAMED_BY_THE_RAISE = {"FailedPrecondition", "ResourceExhausted"}


def documented() -> set[str]:
    names = (value.name for value in errors_pb2.ErrorReason.DESCRIPTOR.values)
    return {name.removeprefix(PREFIX) for name in names if name != f"{PREFIX}UNSPECIFIED"}


def _subclasses(cls: type[JobmeshError]) -> list[type[JobmeshError]]:
    return [cls, *(sub for child in cls.__subclasses__() for sub in _subclasses(child))]


def reasons_of_error_types() -> set[str]:
    for package in (jobmesh.core, jobmesh.server):
        for module in pkgutil.walk_packages(package.__path__, f"{package.__name__}."):
            importlib.import_module(module.name)
    return {
        error.reason
        for error in _subclasses(JobmeshError)
        if error is not JobmeshError and error.__name__ not in NAMED_BY_THE_RAISE
    }


@functools.cache
def reasons_named_by_raises() -> frozenset[str]:
    """`reason=` of every call to an error type, as a literal or a module constant (parsed once a process:
    three tests ask)."""
    found: set[str] = set()
    for path in [*(REPO / "server").rglob("*.py"), *(REPO / "core").rglob("*.py")]:
        tree = ast.parse(path.read_text())
        constants = {
            target.id: node.value.value
            for node in tree.body
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant)
            for target in node.targets
            if isinstance(target, ast.Name)
        }
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and getattr(node.func, "id", "") in NAMED_BY_THE_RAISE):
                continue
            for keyword in node.keywords:
                value = keyword.value
                if keyword.arg == "reason" and isinstance(value, ast.Constant):
                    found.add(str(value.value))
                elif keyword.arg == "reason" and isinstance(value, ast.Name):
                    found.add(str(constants[value.id]))
    return frozenset(found)


def test_every_reason_the_server_sends_is_documented() -> None:
    sent = reasons_of_error_types() | reasons_named_by_raises()
    assert sent - documented() == set()


def test_every_documented_reason_is_sent() -> None:
    sent = reasons_of_error_types() | reasons_named_by_raises()
    assert documented() - sent == set()


def test_the_raises_were_found() -> None:
    assert {"JOB_COMPLETED", "RUN_NOT_REPLAYABLE", "TOO_MANY_STREAMS"} <= reasons_named_by_raises()
