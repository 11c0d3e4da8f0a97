"""The Go, TypeScript and Java examples against one `jobmesh dev`: each creates a job, sees its run succeed,
prints its log and decodes the BadRequest of an invalid create into field violations; the TypeScript one
also through the dashboard's Envoy, over gRPC-Web. Each is built as its README says, offline from what
`make install` fetched. Without Go, Java or Maven the tests fail under CI and are skipped elsewhere."""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import subprocess
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import pytest

from tests.acceptance.processes import REPO, free_port
from tests.acceptance.test_dev import dev
from tests.acceptance.test_dev_authenticated import new_token
from tests.support import missing
from tests.web.conftest import Dashboard

pytestmark = pytest.mark.examples
BUILD = REPO / ".jobmesh" / "clients"
JAVA = REPO / "clients" / "java"


def _run(command: Sequence[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        command,
        cwd=REPO,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )


def _build(command: Sequence[str], env: dict[str, str] | None = None) -> None:
    """Runs a build, one at a time across pytest-xdist's workers (`make unit`): they share its output."""
    BUILD.mkdir(parents=True, exist_ok=True)
    with (BUILD / "build.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        done = _run(command, env)
    assert done.returncode == 0, f"{' '.join(command)} failed:\n{done.stdout[-3000:]}{done.stderr[-3000:]}"


def _require(*tools: str) -> None:
    for tool in tools:
        if shutil.which(tool) is None:
            missing(f"{tool} is not on the PATH: the examples in clients/ need it")


@pytest.fixture(scope="module")
def go_example() -> list[str]:
    _require("go")
    binary = BUILD / "go-example"
    # Offline: the modules come from go.sum through the module cache that `make install` filled.
    _build(["go", "build", "-o", str(binary), "./clients/go"], {"GOPROXY": "off", "GOTOOLCHAIN": "local"})
    return [str(binary)]


@pytest.fixture(scope="module")
def ts_example() -> list[str]:
    _require("node", "npm")
    _build(["npm", "run", "--silent", "build", "--workspace", "clients/ts"])
    return ["node", "clients/ts/dist/main.js"]


@pytest.fixture(scope="module")
def java_example() -> list[str]:
    _require("java", "mvn")
    _build(["mvn", "--quiet", "--batch-mode", "--offline", "-Dstyle.color=never", "-f", str(JAVA), "compile"])
    classpath = f"{JAVA / 'target/classes'}:{(JAVA / 'target/classpath').read_text().strip()}"
    return ["java", "-cp", classpath, "dev.jobmesh.example.Example"]


def _example(request: pytest.FixtureRequest, language: str) -> list[str]:
    command: list[str] = request.getfixturevalue(f"{language}_example")
    return command


def _assert_went_through(output: str, greeting: str) -> None:
    """The run succeeded, its log line was printed, and the refusal's BadRequest was decoded."""
    assert re.search(r"^run jobs/[a-z0-9-]+/runs/[a-z0-9]+ SUCCEEDED$", output, re.MULTILINE), output
    assert f"\nlog: hello from {greeting}\n" in output, output
    assert "\nviolation job.target: required: one of command, http or handler\n" in output, output


@pytest.mark.parametrize(("language", "greeting"), [("go", "Go"), ("ts", "TypeScript"), ("java", "Java")])
def test_an_example_runs_a_job_and_decodes_a_bad_request(
    request: pytest.FixtureRequest, dashboard: Dashboard, language: str, greeting: str
) -> None:
    done = _run([*_example(request, language), dashboard.grpc_address])
    assert done.returncode == 0, done.stdout + done.stderr
    _assert_went_through(done.stdout, greeting)


def test_the_typescript_example_goes_through_envoy_over_grpc_web(
    ts_example: list[str], dashboard: Dashboard
) -> None:
    done = _run(ts_example, {"JOBMESH_SERVER": dashboard.url})  # the address from the environment, too
    assert done.returncode == 0, done.stdout + done.stderr
    _assert_went_through(done.stdout, "TypeScript")


@dataclass(frozen=True)
class AuthenticatedDev:
    address: str
    token: str


@pytest.fixture(scope="module")
def authenticated_dev(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AuthenticatedDev]:
    folder = tmp_path_factory.mktemp("authenticated")
    hashes = folder / "tokens.yaml"
    token = new_token(hashes, "--subject", "examples", "--role", "*=admin", "--executor", "dev-executor")
    (folder / "dev.token").write_text(token)
    flags = [
        "--authentication",
        "on",
        "--token-hashes",
        str(hashes),
        "--token-file",
        str(folder / "dev.token"),
    ]
    address = f"127.0.0.1:{free_port()}"
    with dev(folder, address, *flags, "--executor-id", "dev-executor"):
        yield AuthenticatedDev(address, token)


@pytest.mark.parametrize(("language", "greeting"), [("go", "Go"), ("ts", "TypeScript"), ("java", "Java")])
def test_an_example_sends_the_token_from_the_environment(
    request: pytest.FixtureRequest, authenticated_dev: AuthenticatedDev, language: str, greeting: str
) -> None:
    command = [*_example(request, language), authenticated_dev.address]
    without = _run(command, {"JOBMESH_TOKEN": ""})
    assert without.returncode == 1, without.stdout + without.stderr
    assert "unauthenticated" in without.stderr.lower()
    done = _run(command, {"JOBMESH_TOKEN": authenticated_dev.token})
    assert done.returncode == 0, done.stdout + done.stderr
    _assert_went_through(done.stdout, greeting)


@pytest.mark.parametrize("language", ["go", "ts", "java"])
def test_an_example_exits_non_zero_when_no_server_answers(
    request: pytest.FixtureRequest, language: str
) -> None:
    done = _run([*_example(request, language), f"127.0.0.1:{free_port()}"])
    assert done.returncode == 1, done.stdout + done.stderr
    assert "error:" in done.stderr
    assert "SUCCEEDED" not in done.stdout
