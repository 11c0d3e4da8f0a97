"""The Helm chart's processes, run as its manifests say: its migration Job, then its server (with two
workers), watcher and executor, each with the command, arguments and environment that `helm template`
renders (Secrets' keys resolved, each pod's address mapped to a loopback port of its own, the server's
Service name to the server's address), against the suite's PostgreSQL, Kafka and Redis. Each answers the
paths of its readiness and liveness probes with 200, and a job created on the server runs to success."""

from __future__ import annotations

import os
import subprocess
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml

from jobmesh.v1 import run_pb2
from tests.acceptance.mesh import Mesh, Process, command_job, create, get_run
from tests.acceptance.processes import BIN, REPO, free_port, wait_serving
from tests.support import eventually, missing

pytestmark = [pytest.mark.postgres, pytest.mark.kafka, pytest.mark.redis, pytest.mark.processes]

CHART = REPO / "deploy" / "helm" / "jobmesh"
HELM = REPO / ".jobmesh" / "tools" / "bin" / "helm"
RELEASE = "mesh"
SERVER_SERVICE = f"{RELEASE}-jobmesh-server"


def rendered(mesh: Mesh) -> list[dict[str, Any]]:
    if not HELM.is_file():
        missing(f"{HELM} is missing: `make install` builds it (tools/install_helm.sh)")
    values = {
        "connections.databaseUrl": mesh.env["JOBMESH_DATABASE_URL"],
        "connections.queueUrl": mesh.env["JOBMESH_QUEUE_URL"],
        "connections.signalsUrl": mesh.env["JOBMESH_REDIS_URL"],
        "executor.queues": f"{{{mesh.queue}}}",
        "executor.allowedCommands": "{/**}",
        "server.workers": "2",
    }
    sets = [f"--set-string={name}={value}" for name, value in values.items()]
    done = subprocess.run(
        [str(HELM), "template", RELEASE, str(CHART), *sets],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return [item for item in yaml.safe_load_all(done.stdout) if item]


class Pods:
    """What a kubelet would start of the rendered objects, as local processes."""

    def __init__(self, objects: list[dict[str, Any]], mesh: Mesh) -> None:
        self.mesh = mesh
        self.secrets = {o["metadata"]["name"]: o["stringData"] for o in objects if o["kind"] == "Secret"}
        self.containers = {
            c["args"][0]: c
            for o in objects
            if o["kind"] in ("Deployment", "Job")
            for c in o["spec"]["template"]["spec"]["containers"]
            if c["command"] == ["jobmesh"]
        }
        self.server_address = ""

    def command(self, name: str) -> tuple[list[str], dict[str, str], int | None]:
        """The container's arguments and environment on this machine, and its health port (if any)."""
        container = self.containers[name]
        health = free_port() if "ports" in container else None
        listen = {"server": f"127.0.0.1:{free_port()}"}.get(name, "")

        def local(value: str) -> str:
            if value.startswith("0.0.0.0:"):  # the pod's address: a port of this process's own
                port = int(value.rsplit(":", 1)[1])
                return f"127.0.0.1:{health}" if port == container_port(container, "health") else listen
            if value.startswith(f"{SERVER_SERVICE}:"):
                return self.server_address
            if value.startswith("/var/lib/jobmesh/"):
                return str(self.mesh.tmp / name / value.removeprefix("/var/lib/jobmesh/"))
            return value

        env: dict[str, str] = {}
        for item in container.get("env", []):
            if reference := item.get("valueFrom", {}).get("secretKeyRef"):
                env[item["name"]] = self.secrets[reference["name"]][reference["key"]]
            else:
                env[item["name"]] = local(item["value"])
        if name == "server":
            self.server_address = listen
        return [local(arg) for arg in container["args"]], env, health

    def start(self, name: str) -> tuple[Process, int]:
        args, env, health = self.command(name)
        assert health is not None
        log = self.mesh.tmp / f"{name}.log"
        inherited = {k: v for k, v in os.environ.items() if not k.startswith("JOBMESH_")}
        with log.open("ab") as output:
            popen = subprocess.Popen(
                [str(BIN / "jobmesh"), *args],
                stdout=output,
                stderr=subprocess.STDOUT,
                env={**inherited, **env},
                cwd=self.mesh.tmp,
                start_new_session=True,
            )
        process = Process(name, popen, log, self.server_address if name == "server" else "")
        self.mesh.processes.append(process)
        return process, health


def container_port(container: dict[str, Any], name: str) -> int:
    [port] = [p["containerPort"] for p in container["ports"] if p["name"] == name]
    return int(port)


def get(port: int, path: str) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=3) as answer:
            return int(answer.status)
    except OSError:
        return 0


@pytest.fixture
def pods(mesh: Mesh) -> Pods:
    return Pods(rendered(mesh), mesh)


def test_the_charts_processes_start_answer_their_probes_and_run_a_job(pods: Pods, mesh: Mesh) -> None:
    args, env, _ = pods.command("migrate")
    inherited = {k: v for k, v in os.environ.items() if not k.startswith("JOBMESH_")}
    migrated = subprocess.run(
        [str(BIN / "jobmesh"), *args],
        env={**inherited, **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert migrated.returncode == 0, migrated.stdout + migrated.stderr

    started = {name: pods.start(name) for name in ("server", "watcher", "executor")}
    server, _ = started["server"]
    wait_serving(server.address, timeout=60, process=server.popen)
    for name, (process, port) in started.items():
        container = pods.containers[name]
        for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
            path = container[probe]["httpGet"]["path"]
            assert container[probe]["httpGet"]["port"] == "health"

            def answers(port: int = port, path: str = path, process: Process = process) -> bool:
                assert process.popen.poll() is None, f"{process.name} exited:\n{process.log.read_text()}"
                return get(port, path) == 200

            eventually(answers, 60, f"{name}'s {probe} ({path}) to answer 200")

    jobs, search = mesh.stubs(server)
    run = create(jobs, command_job(mesh.queue, "true")).run
    eventually(
        lambda: get_run(search, run.name).state == run_pb2.RUN_STATE_SUCCEEDED,
        60,
        "the run on the chart's executor to succeed",
    )
    assert Path(mesh.tmp / "server" / "journal").is_dir(), "the server journals where the chart mounts"
