"""A job cannot reach its executor's secrets: `jobmesh dev` running as root, with TLS, authentication, a token
file and a secrets file, runs a command job that tries the executor's `/proc/PID/environ` (its parent's, PID
1's and the executor's real pid), the executor's token, TLS key, token hashes and secrets files, and
`/etc/shadow`: each read is refused. The job runs as `nobody`, and its environment holds only its own values
and its granted secret (redacted in its log), nothing of the executor's."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from jobmesh.executor.redaction import MASK
from jobmesh.transport.tls import ChannelTls
from jobmesh.v1 import job_pb2, job_service_pb2, run_pb2, search_service_pb2
from tests.acceptance.processes import free_port
from tests.acceptance.test_dev import dev
from tests.acceptance.test_dev_authenticated import new_token
from tests.support import SUITE_ISOLATION, SUITE_SETTINGS, eventually
from tests.support_certificates import CertificateAuthority

pytestmark = [
    pytest.mark.processes,
    pytest.mark.skipif(os.geteuid() != 0, reason="the attack is on an executor that runs as root"),
]

EXECUTOR_ONLY = "executor-cloud-key-4f1d"  # in the executor's environment, never in a job's
GRANTED = "granted-secret-value-9c2e"
ALLOWED_VARIABLES = {
    "PATH",
    "HOME",
    "LANG",
    "LC_ALL",
    "PWD",
    "OWN",
    "GRANTED",
    "JOBMESH_RUN",
    "JOBMESH_ATTEMPT",
}


def open_folder(path: Path) -> Path:
    """A folder anyone may enter (its parents too): what keeps its files from a job is then the sandbox."""
    path.mkdir(mode=0o755)
    for folder in (path, *path.parents):
        if folder != Path("/") and not folder.stat().st_mode & stat.S_IXOTH:
            folder.chmod(folder.stat().st_mode | stat.S_IXOTH)
    return path


def attempts(paths: list[str]) -> str:
    reads = " ".join(paths)
    return (
        "id -un; id -u; ls /proc | grep -cE '^[0-9]+$';"
        f' for f in {reads}; do if cat "$f" >/dev/null 2>&1; then echo "READ $f"; else echo "REFUSED $f"; fi;'
        " done; env"
    )


def test_a_job_of_a_root_executor_reads_none_of_its_secrets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = open_folder(tmp_path / "open")
    ca = CertificateAuthority()
    trust = ca.write(folder / "ca.pem")
    leaf = ca.issue_server(folder / "server")
    leaf.key.chmod(0o644)  # readable by anyone: only the sandbox hides it
    hashes = folder / "tokens.yaml"
    token = new_token(hashes, "--subject", "dev", "--role", "*=admin", "--executor", "dev-executor")
    token_file = folder / "dev.token"
    token_file.write_text(token)
    token_file.chmod(0o644)
    secrets = folder / "secrets.env"
    secrets.write_text(f"GRANTED={GRANTED}\n")
    secrets.chmod(0o600)
    monkeypatch.setenv("CLOUD_SECRET_KEY", EXECUTOR_ONLY)
    for variable in SUITE_ISOLATION:  # the defaults, not the suite's
        monkeypatch.delitem(SUITE_SETTINGS, variable)
    tls = ChannelTls(ca_bundle=trust)
    flags = [
        "--tls-cert", str(leaf.chain), "--tls-key", str(leaf.key), "--tls-ca", str(trust),
        "--authentication", "on", "--token-hashes", str(hashes), "--token-file", str(token_file),
        "--executor-id", "dev-executor", "--secrets", f"file:{secrets}",
    ]  # fmt: skip
    metadata = (("authorization", f"Bearer {token}"),)
    with dev(tmp_path, f"127.0.0.1:{free_port()}", *flags, tls=tls) as (process, (jobs, search)):
        targets = [
            "/proc/$PPID/environ",
            "/proc/1/environ",
            f"/proc/{process.pid}/environ",
            *map(str, (token_file, leaf.key, hashes, secrets)),
            "/etc/shadow",
        ]
        job = job_pb2.Job(
            schedule=job_pb2.Schedule(immediate=job_pb2.Schedule.Immediate()),
            target=job_pb2.Target(
                command=job_pb2.Target.Command(
                    argv=["sh", "-c", attempts(targets)],
                    env={"OWN": "own-value", "GRANTED": "secret://GRANTED"},
                )
            ),
        )
        created = jobs.CreateJob(job_service_pb2.CreateJobRequest(job=job), metadata=metadata, timeout=10)

        def ended() -> run_pb2.Run | None:
            request = search_service_pb2.GetRunRequest(name=created.run.name)
            run = search.GetRun(request, metadata=metadata, timeout=10).run
            return run if run.state == run_pb2.RUN_STATE_SUCCEEDED else None

        eventually(ended, 60, "the job to succeed")
        request = search_service_pb2.TailRunLogsRequest(name=created.run.name)
        texts = [
            line.text
            for answer in search.TailRunLogs(request, metadata=metadata, timeout=60)
            for line in answer.lines
        ]
    user, uid, processes, *rest = texts
    reads, environment = rest[: len(targets)], rest[len(targets) :]
    assert (user, uid) == ("nobody", "65534")
    assert int(processes) < 8, texts  # the sandbox's own: none of the machine's
    assert reads == [f"REFUSED {path.replace('$PPID', '1')}" for path in targets], texts
    variables = dict(line.split("=", 1) for line in environment)
    assert set(variables) <= ALLOWED_VARIABLES, variables
    assert variables["OWN"] == "own-value"
    assert variables["GRANTED"] == MASK  # the job had the value; its log is redacted of it
    assert not [text for text in texts if EXECUTOR_ONLY in text or GRANTED in text or token in text]
