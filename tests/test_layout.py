"""The dependency rules of docs/design.md ("Dependency rules"): the packages' by import-linter (its contract
is in pyproject.toml), and those of `clients/`, which holds no package of the mesh, by reading its sources.

One door is open each way, both named here: a client may use the executor's public facade (the names of
`jobmesh.executor.__all__`, the embeddable executor the SDK re-exports), and the `jobmesh` command adds the
SDK's CLI groups (`jobmesh.client._cli`) beside the mesh's processes."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import jobmesh.executor

REPO = Path(__file__).resolve().parents[1]
# What a client may import of jobmesh: the contract's generated code (the public API, and the executor
# protocol for a client that serves runs), how to dial the server (TLS), and the Python SDK's own modules.
CLIENT_IMPORTS = ("jobmesh.v1", "jobmesh.control.v1", "jobmesh.transport", "jobmesh.client")
# ... and the executor's public facade, by name: not its modules.
EXECUTOR_FACADE = "jobmesh.executor"
FACADE_NAMES = frozenset(jobmesh.executor.__all__)
# The one module outside clients/ that imports the SDK, and what it imports.
CLI_WIRING = {"processes/command.py": {"jobmesh.client._cli"}}


def test_the_packages_keep_their_layers() -> None:
    lint_imports = Path(sys.executable).parent / "lint-imports"
    done = subprocess.run(
        [str(lint_imports), "--no-cache"], cwd=REPO, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "0 broken" in done.stdout


def forbidden_imports(source: str) -> list[str]:
    """The jobmesh modules a client's source imports that are not the contract or the SDK."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module == EXECUTOR_FACADE:
            names = [f"{node.module}.{a.name}" for a in node.names if a.name not in FACADE_NAMES]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
            names = names[:1] if node.module != "jobmesh" else names[1:]
        else:
            continue
        for name in names:
            inside = name == "jobmesh" or name.startswith("jobmesh.")
            allowed = name == EXECUTOR_FACADE or any(
                name == ok or name.startswith(f"{ok}.") for ok in CLIENT_IMPORTS
            )
            if inside and not allowed:
                found.append(name)
    return found


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("from jobmesh.v1 import job_pb2", []),
        ("import jobmesh.v1.job_service_pb2_grpc as stubs", []),
        ("from jobmesh.client import Client", []),
        ("from jobmesh.control.v1 import executor_control_pb2", []),
        ("from jobmesh.transport.tls import ChannelTls", []),
        ("import grpc, json", []),
        ("from jobmesh.server.app import start_server", ["jobmesh.server.app"]),
        ("from jobmesh import core", ["jobmesh.core"]),
        ("import jobmesh.adapters.queue.kafka", ["jobmesh.adapters.queue.kafka"]),
        ("def f():\n    from jobmesh.executor import runtime", ["jobmesh.executor.runtime"]),
        ("from jobmesh.executor import Executor, HandlerRegistry", []),
        ("import jobmesh.executor", []),
        ("from jobmesh.executor import Executor, runtime", ["jobmesh.executor.runtime"]),
        ("from jobmesh.executor.runtime import Executor", ["jobmesh.executor.runtime"]),
        ("import jobmesh.executor.handlers", ["jobmesh.executor.handlers"]),
    ],
)
def test_the_client_check_tells_the_contract_from_the_mesh(source: str, expected: list[str]) -> None:
    assert forbidden_imports(source) == expected


def test_the_executor_protocol_loads_no_module_of_the_executor() -> None:
    """`jobmesh.control.v1` (the contract) is a package of its own: importing it, as the core and the server
    do, loads nothing of the executor."""
    probe = (
        "import sys, jobmesh.control.v1.executor_control_pb2, jobmesh.control.v1.dispatch_pb2\n"
        "print('\\n'.join(sorted(m for m in sys.modules if m.startswith('jobmesh.executor'))))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.split() == []


def test_clients_import_only_the_contract() -> None:
    offenders = {
        str(path.relative_to(REPO)): names
        for path in sorted((REPO / "clients").rglob("*.py"))
        if "node_modules" not in path.parts and (names := forbidden_imports(path.read_text()))
    }
    assert offenders == {}


def test_nothing_outside_clients_imports_from_them_but_the_command_its_cli() -> None:
    found: dict[str, set[str]] = {}
    for folder in ("core", "adapters", "server", "watcher", "executor", "processes", "benchmarks", "tools"):
        for path in (REPO / folder).rglob("*.py"):
            tree = ast.parse(path.read_text())
            for node in ast.walk(tree):
                if not isinstance(node, ast.Import | ast.ImportFrom):
                    continue
                module = node.module if isinstance(node, ast.ImportFrom) else None
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else [module or ""]
                for name in names:
                    if name == "jobmesh.client" or name.startswith("jobmesh.client."):
                        found.setdefault(str(path.relative_to(REPO)), set()).add(name)
    assert found == CLI_WIRING


# The mesh's packages, and the SDK apart: the SDK mirrors the contract's names (its errors, enums and
# resources are the client's side of core's), and is a package of its own that never imports the mesh.
MESH_FOLDERS = ("core", "adapters", "server", "watcher", "executor", "processes", "transport")
SDK_FOLDERS = ("clients/python",)


def classes_by_name(folders: tuple[str, ...]) -> dict[str, list[str]]:
    """Each class name defined in the folders' sources (at any depth), with where."""
    found: dict[str, list[str]] = {}
    for folder in folders:
        for path in sorted((REPO / folder).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
            for node in ast.walk(tree):
                if isinstance(node, ast.ClassDef):
                    found.setdefault(node.name, []).append(f"{path.relative_to(REPO)}:{node.lineno}")
    return found


def twice(folders: tuple[str, ...]) -> dict[str, list[str]]:
    return {name: places for name, places in classes_by_name(folders).items() if len(places) > 1}


@pytest.mark.parametrize("folders", [MESH_FOLDERS, SDK_FOLDERS], ids=["mesh", "sdk"])
def test_a_class_name_means_one_thing(folders: tuple[str, ...]) -> None:
    assert twice(folders) == {}


def test_the_check_finds_a_name_given_twice(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "m.py").write_text("class Watcher:\n    class _Inner: ...\n")
    monkeypatch.setattr(sys.modules[__name__], "REPO", tmp_path)
    assert set(twice(("a", "b"))) == {"Watcher", "_Inner"}


def name_builders(folders: tuple[str, ...]) -> list[str]:
    """Where a source of the folders builds a resource name (`jobs/…`) in an f-string, but core/names.py."""
    found = []
    for folder in folders:
        for path in sorted((REPO / folder).rglob("*.py")):
            if path == REPO / "core" / "names.py":
                continue
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
                if isinstance(node, ast.JoinedStr) and node.values:
                    first = node.values[0]
                    if isinstance(first, ast.Constant) and str(first.value).startswith("jobs/"):
                        found.append(f"{path.relative_to(REPO)}:{node.lineno}")
    return found


def test_resource_names_are_built_in_core_names_alone() -> None:
    assert name_builders(MESH_FOLDERS) == []


def test_the_check_finds_a_name_built_elsewhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "m.py").write_text('def name(job: str) -> str:\n    return f"jobs/{job}"\n')
    monkeypatch.setattr(sys.modules[__name__], "REPO", tmp_path)
    assert name_builders(("a",)) == ["a/m.py:2"]


def growing_powers(folders: tuple[str, ...]) -> list[str]:
    """Where the folders raise to a power that is not a constant (a delay growing per try): the backoff."""
    found = []
    for folder in folders:
        for path in sorted((REPO / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
                if _growing_power(node):
                    found.append(f"{path.relative_to(REPO)}:{getattr(node, 'lineno', 0)}")
    return found


def _growing_power(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.BinOp)
        and isinstance(node.op, ast.Pow)
        and not isinstance(node.right, ast.Constant)
    )


def test_one_backoff_function() -> None:
    """Retries, the executor's reconnects and the Redis subscriber's all wait by core.backoff alone."""
    assert [place.split(":")[0] for place in growing_powers(MESH_FOLDERS)] == ["core/backoff.py"]


def literals_of(folders: tuple[str, ...], values: frozenset[str], but: tuple[str, ...]) -> list[str]:
    """Where the folders' sources hold one of `values` as a string literal, but in the files `but`."""
    found = []
    for folder in folders:
        for path in sorted((REPO / folder).rglob("*.py")):
            where = str(path.relative_to(REPO))
            if where in but or where.startswith(but):
                continue
            tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
            exported = {id(node) for node in _exports(tree)}  # a class of that name, in `__all__`
            for node in ast.walk(tree):
                if isinstance(node, ast.Constant) and node.value in values and id(node) not in exported:
                    found.append(f"{where}:{getattr(node, 'lineno', 0)}: {node.value}")
    return found


def _exports(tree: ast.Module) -> list[ast.AST]:
    return [
        element
        for statement in tree.body
        if isinstance(statement, ast.Assign)
        and any(isinstance(target, ast.Name) and target.id == "__all__" for target in statement.targets)
        for element in ast.walk(statement.value)
    ]


def test_error_types_and_state_names_are_written_in_core_alone() -> None:
    """Core's lists are the only place an error type or a state is spelled; migrations keep the names they
    were written with, and are history."""
    from jobmesh.core.error_types import ErrorType
    from jobmesh.core.states import JobState, RunState

    values = frozenset({*ErrorType, *RunState, *JobState}) - {""}
    but = ("core/error_types.py", "core/states.py", "adapters/store/migrations/")
    assert literals_of(MESH_FOLDERS, frozenset(str(value) for value in values), but) == []


def test_error_types_are_all_documented_in_the_contract() -> None:
    from jobmesh.core.error_types import ErrorType

    contract = (REPO / "protos" / "jobmesh" / "v1" / "job.proto").read_text(encoding="utf-8")
    assert [str(kind) for kind in ErrorType if f"`{kind}`" not in contract] == []


def test_the_literal_check_finds_a_spelled_out_error_type(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "m.py").write_text('__all__ = ["Timeout"]\nclass Timeout: ...\nKIND = "Timeout"\n')
    monkeypatch.setattr(sys.modules[__name__], "REPO", tmp_path)
    assert literals_of(("a",), frozenset({"Timeout"}), ()) == ["a/m.py:3: Timeout"]


STATE_MODULES = ("core/states.py", "core/wire_enums.py")
_STATE_ENUMS = frozenset({"RunState", "JobState"})
_CORE_ENUMS = _STATE_ENUMS | {"Priority", "RunTrigger", "AuditAction"}


def state_rules(folders: tuple[str, ...]) -> list[str]:
    """Where the folders' sources, but core/states.py (and core/wire_enums.py, the wire's values of core's
    other enums), write down a rule of the state machine: a set of two or more states (a literal of
    `RunState.X`, `JobState.X` members), a map between a core enum and the wire's, or what an executor's stop
    becomes (a map keyed by `StopReason`)."""
    found = []
    for folder in folders:
        for path in sorted((REPO / folder).rglob("*.py")):
            where = str(path.relative_to(REPO))
            if where in STATE_MODULES:
                continue
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
                kind = _state_rule(node)
                if kind:
                    found.append(f"{where}:{getattr(node, 'lineno', 0)}: {kind}")
    return found


def _state_rule(node: ast.AST) -> str:
    if isinstance(node, ast.Set | ast.Tuple | ast.List) and (
        sum(_member_of(element, _STATE_ENUMS) for element in node.elts) >= 2
    ):
        return "a state set"
    if isinstance(node, ast.Dict):
        keys = [key for key in node.keys if key is not None]
        if any(_member_of(key, frozenset({"StopReason"})) for key in keys):
            return "a stop reason map"
        if _mixes(keys + node.values):
            return "a wire map"
    if isinstance(node, ast.DictComp) and _mixes([node.key, node.value, *node.generators]):
        return "a wire map"
    return ""


def _member_of(node: ast.AST, enums: frozenset[str]) -> bool:
    return isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in enums


def _mixes(nodes: list[Any]) -> bool:
    """Whether the nodes name both a core enum and a wire module (`…_pb2`)."""
    names = {found.id for node in nodes for found in ast.walk(node) if isinstance(found, ast.Name)}
    return bool(names & _CORE_ENUMS) and any(name.endswith("_pb2") for name in names)


def test_the_state_sets_and_maps_are_written_in_core_states_alone() -> None:
    assert state_rules(MESH_FOLDERS) == []


def test_the_state_check_finds_a_second_set_and_a_second_map(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "m.py").write_text(
        "HELD = (RunState.RUNNING, RunState.CANCELLING)\n"
        "ONE = frozenset({RunState.CANCELLING})\n"
        "WIRE = {run_pb2.RUN_STATE_FAILED: RunState.FAILED}\n"
        'ALL = {s: job_pb2.JobState.Value(f"JOB_STATE_{s.value}") for s in JobState}\n'
        "STOPS = {StopReason.CANCEL: 1}\n"
        "LANES = {Priority.HIGH: job_pb2.PRIORITY_HIGH}\n"
    )
    monkeypatch.setattr(sys.modules[__name__], "REPO", tmp_path)
    assert state_rules(("a",)) == [
        "a/m.py:1: a state set",
        "a/m.py:3: a wire map",
        "a/m.py:4: a wire map",
        "a/m.py:5: a stop reason map",
        "a/m.py:6: a wire map",
    ]


SPEC_DECODER = "core/definitions.py"
_PARSES = frozenset({"ParseFromString", "MergeFromString"})


def spec_decodes(folders: tuple[str, ...]) -> list[str]:
    """Where the folders' sources, but core/definitions.py (`decode_spec`), decode a `jobmesh.v1.Job`:
    `Job.FromString(…)`, or `ParseFromString`/`MergeFromString` into a `Job()` (one made there, or a name
    the file binds to one)."""
    found = []
    for folder in folders:
        for path in sorted((REPO / folder).rglob("*.py")):
            where = str(path.relative_to(REPO))
            if where == SPEC_DECODER:
                continue
            tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
            jobs = {
                target.id
                for node in ast.walk(tree)
                if isinstance(node, ast.Assign | ast.AnnAssign)
                and node.value is not None
                and _is_job(node.value)
                for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
                if isinstance(target, ast.Name)
            }
            for node in ast.walk(tree):
                if _decodes_a_job(node, jobs):
                    found.append(f"{where}:{getattr(node, 'lineno', 0)}")
    return found


def _is_job(node: ast.AST) -> bool:
    """`Job(…)` or `….Job(…)`: a new `jobmesh.v1.Job`."""
    return isinstance(node, ast.Call) and _names_job(node.func)


def _names_job(node: ast.AST) -> bool:
    return (isinstance(node, ast.Name) and node.id == "Job") or (
        isinstance(node, ast.Attribute) and node.attr == "Job"
    )


def _decodes_a_job(node: ast.AST, jobs: set[str]) -> bool:
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
        return False
    receiver, method = node.func.value, node.func.attr
    if method == "FromString":
        return _names_job(receiver)
    return method in _PARSES and (
        _is_job(receiver) or (isinstance(receiver, ast.Name) and receiver.id in jobs)
    )


def test_a_stored_spec_is_decoded_by_core_definitions_alone() -> None:
    """A job's spec is decoded once per request or read, by `decode_spec`, and the message carried on."""
    assert spec_decodes(MESH_FOLDERS) == []


def test_the_decode_check_finds_each_way_of_decoding_a_job(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "m.py").write_text(
        "job = job_pb2.Job.FromString(spec)\n"
        "other = Job()\n"
        "other.ParseFromString(spec)\n"
        "job_pb2.Job().MergeFromString(spec)\n"
        "run = dispatch_pb2.DispatchedRun.FromString(value)\n"
        "message.ParseFromString(value)\n"
    )
    monkeypatch.setattr(sys.modules[__name__], "REPO", tmp_path)
    assert spec_decodes(("a",)) == ["a/m.py:1", "a/m.py:3", "a/m.py:4"]
