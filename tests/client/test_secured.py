"""The SDK's and the CLI's TLS and token options against a live `jobmesh dev` that serves TLS (a certificate
for `jobmesh.test` only, so the name must be given) and authenticates every call: an admin's token runs a
job, a viewer's is refused a create, no token or a wrong one is unauthenticated, a certificate the CA did
not sign is unavailable."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner

from jobmesh.client import (
    AsyncClient,
    ChannelTls,
    Client,
    PermissionDenied,
    RetryConfig,
    RunState,
    Unauthenticated,
    Unavailable,
    command,
    immediately,
)
from jobmesh.processes.command import jobmesh
from tests.acceptance.processes import free_port
from tests.acceptance.test_dev import dev
from tests.acceptance.test_dev_authenticated import new_token
from tests.support_certificates import CertificateAuthority

NAME = "jobmesh.test"
ONCE = RetryConfig(max_attempts=1)


@dataclass(frozen=True)
class Secured:
    address: str
    ca: Path
    admin: str
    viewer: str
    token_file: Path

    @property
    def tls(self) -> ChannelTls:
        return ChannelTls(ca_bundle=self.ca, server_name=NAME)


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    folder = tmp_path_factory.mktemp("secured")
    authority = CertificateAuthority()
    ca = authority.write(folder / "ca.pem")
    leaf = authority.issue_server(folder / "server", names=(NAME,))
    hashes = folder / "tokens.yaml"
    admin = new_token(hashes, "--subject", "admin", "--role", "*=admin", "--executor", "dev-executor")
    viewer = new_token(hashes, "--subject", "viewer", "--role", "*=viewer")
    token_file = folder / "admin.token"
    token_file.write_text(admin + "\n")
    address = f"127.0.0.1:{free_port()}"
    flags = [
        "--tls-cert", str(leaf.chain), "--tls-key", str(leaf.key),
        "--tls-ca", str(ca), "--tls-server-name", NAME,  # the embedded executor's own channel
        "--authentication", "on", "--token-hashes", str(hashes), "--token-file", str(token_file),
        "--executor-id", "dev-executor",
    ]  # fmt: skip
    with dev(folder, address, *flags, tls=ChannelTls(ca_bundle=ca, server_name=NAME)):
        yield Secured(address, ca, admin, viewer, token_file)


def test_an_admin_token_over_tls_runs_a_job(secured: Secured) -> None:
    with Client(secured.address, tls=secured.tls, token=secured.admin) as client:
        created = client.create_job(immediately(), command(["echo", "secured"]))
        assert created.run is not None
        run = client.wait_for_run(created.run.name, timedelta(seconds=30))
        assert run.state == RunState.SUCCEEDED
        assert [line.text for line in client.tail_run_logs(run.name)] == ["secured"]


def test_no_token_or_a_wrong_one_is_unauthenticated(secured: Secured) -> None:
    for token in (None, "not-a-token"):
        with Client(secured.address, tls=secured.tls, token=token) as client, pytest.raises(Unauthenticated):
            client.get_job("anything")


def test_a_viewer_reads_but_may_not_create(secured: Secured) -> None:
    with Client(secured.address, tls=secured.tls, token=secured.viewer) as client:
        list(client.list_jobs(page_size=1))
        with pytest.raises(PermissionDenied):
            client.create_job(immediately(), command(["true"]))


def test_the_certificates_name_must_match(secured: Secured) -> None:
    unnamed = ChannelTls(ca_bundle=secured.ca)  # 127.0.0.1 is not the name in the certificate
    with (
        Client(secured.address, tls=unnamed, token=secured.admin, retry=ONCE) as client,
        pytest.raises(Unavailable),
    ):
        client.get_job("anything")
    with Client(secured.address, token=secured.admin, retry=ONCE) as plaintext, pytest.raises(Unavailable):
        plaintext.get_job("anything")


def test_the_asyncio_client_over_tls_with_a_token(secured: Secured) -> None:
    async def create_then_list() -> tuple[str, list[str]]:
        async with AsyncClient(secured.address, tls=secured.tls, token=secured.admin) as client:
            created = await client.create_job(immediately(), command(["true"]))
            return created.job.name, [job.name async for job in client.list_jobs(page_size=1)]

    name, listed = asyncio.run(create_then_list())
    assert name.startswith("jobs/")
    assert name in listed  # written, then read back a page of one at a time


def test_the_cli_takes_tls_and_token_from_flags_or_the_environment(secured: Secured) -> None:
    tls = ["--tls-ca", str(secured.ca), "--tls-server-name", NAME]
    runner = CliRunner()
    base = ["jobs", "list", "--server", secured.address]
    assert runner.invoke(jobmesh, [*base, *tls, "--token-file", str(secured.token_file)]).exit_code == 0
    env = {
        "JOBMESH_SERVER": secured.address,
        "JOBMESH_TLS_CA": str(secured.ca),
        "JOBMESH_TLS_SERVER_NAME": NAME,
        "JOBMESH_TOKEN": secured.admin,
    }
    assert runner.invoke(jobmesh, ["jobs", "list"], env=env).exit_code == 0
    assert runner.invoke(jobmesh, [*base, *tls]).exit_code == 5  # no token
    viewer = runner.invoke(
        jobmesh, ["jobs", "create", *base[2:], *tls, "--token", secured.viewer, "--", "true"]
    )
    assert viewer.exit_code == 5
    assert "PERMISSION_DENIED" in viewer.stderr
    both = runner.invoke(jobmesh, [*base, *tls, "--token", "x", "--token-file", str(secured.token_file)])
    assert both.exit_code == 2
    half = runner.invoke(jobmesh, [*base, "--tls-cert", str(secured.ca)])
    assert half.exit_code == 2
    assert "give both or neither" in half.stderr
