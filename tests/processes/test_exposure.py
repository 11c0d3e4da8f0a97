"""`jobmesh dev` on a non-loopback address: refused unless calls are encrypted and authenticated, or the owner
says so with `--allow-insecure-public`; and the TLS settings of the server and of executors."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from jobmesh.processes import assembly, config_builders
from jobmesh.processes import command as cli
from jobmesh.processes.exposure import Exposure, is_loopback, refuse_insecure_public
from jobmesh.processes.settings import SettingsError
from jobmesh.transport.tls import ChannelTls


@pytest.fixture(autouse=True)
def no_process_starts(monkeypatch: pytest.MonkeyPatch) -> list[tuple[object, ...]]:
    for name in list(os.environ):
        if name.startswith("JOBMESH_"):
            monkeypatch.delenv(name)
    started: list[tuple[object, ...]] = []
    monkeypatch.setattr(assembly, "run_dev", lambda *args, **kwargs: _record(started, args))
    return started


async def _record(started: list[tuple[object, ...]], args: tuple[object, ...]) -> None:
    started.append(args)


@pytest.mark.parametrize(
    ("address", "loopback"),
    [
        ("127.0.0.1:50051", True),
        ("127.8.9.10:1", True),
        ("localhost:50051", True),
        ("[::1]:50051", True),
        ("unix:/tmp/jobmesh.sock", True),
        ("0.0.0.0:50051", False),
        ("[::]:50051", False),
        (":50051", False),
        ("192.168.1.4:50051", False),
        ("example.org:50051", False),
    ],
)
def test_loopback_addresses_are_told_from_the_others(address: str, loopback: bool) -> None:
    assert is_loopback(address) is loopback


@pytest.mark.parametrize("authentication", [False, True])
@pytest.mark.parametrize("tls", [False, True])
def test_public_grpc_needs_tls_and_authentication_or_the_flag(tls: bool, authentication: bool) -> None:
    exposure = Exposure("0.0.0.0:50051", None, tls=tls, authentication=authentication)
    if tls and authentication:
        assert refuse_insecure_public(exposure, allowed=False) == []
        return
    with pytest.raises(SettingsError, match="--allow-insecure-public") as refused:
        refuse_insecure_public(exposure, allowed=False)
    assert refused.value.setting.name == "listen"
    [warning] = refuse_insecure_public(exposure, allowed=True)
    assert "0.0.0.0:50051" in warning


@pytest.mark.parametrize("authentication", [False, True])
def test_loopback_needs_nothing(authentication: bool) -> None:
    exposure = Exposure("127.0.0.1:0", "127.0.0.1:8080", tls=False, authentication=authentication)
    assert refuse_insecure_public(exposure, allowed=False) == []


def test_a_public_dashboard_is_plain_http_and_always_needs_the_flag() -> None:
    exposure = Exposure("127.0.0.1:0", "0.0.0.0:8080", tls=True, authentication=True)
    with pytest.raises(SettingsError, match="--allow-insecure-public") as refused:
        refuse_insecure_public(exposure, allowed=False)
    assert refused.value.setting.name == "dashboard_listen"


def test_jobmesh_dev_refuses_a_public_address_naming_the_flag(
    capsys: pytest.CaptureFixture[str], no_process_starts: list[tuple[object, ...]]
) -> None:
    assert cli.main(["dev", "--listen", "0.0.0.0:0", "--dashboard", "off"]) == 2
    error = capsys.readouterr().err
    assert "--allow-insecure-public" in error
    assert "--listen" in error
    assert no_process_starts == []


def test_jobmesh_dev_listens_publicly_when_told_and_says_so(
    capsys: pytest.CaptureFixture[str], no_process_starts: list[tuple[object, ...]]
) -> None:
    args = ["dev", "--listen", "0.0.0.0:0", "--dashboard", "off", "--allow-insecure-public", "on"]
    assert cli.main(args) == 0
    assert "open to anyone" in capsys.readouterr().err
    assert len(no_process_starts) == 1


def test_tls_settings_build_the_server_and_channel_configs(tmp_path: Path) -> None:
    files = {name: tmp_path / name for name in ("cert", "key", "ca", "client", "client.key")}
    for path in files.values():
        path.write_text("pem")
    server = config_builders.server_config(
        {
            "tls_cert": files["cert"],
            "tls_key": files["key"],
            "tls_client_ca": files["ca"],
            "executor_listen": "127.0.0.1:0",
        }
    )
    assert server.tls is not None
    assert server.tls.client_ca == files["ca"]
    assert server.executor_listen == "127.0.0.1:0"
    executor = config_builders.executor_config(
        {
            "tls_ca": files["ca"],
            "tls_client_cert": files["client"],
            "tls_client_key": files["client.key"],
            "tls_server_name": "jobmesh.internal",
        }
    )
    assert executor.tls == ChannelTls(files["ca"], files["client"], files["client.key"], "jobmesh.internal")
    assert config_builders.executor_config({}).tls is None
    assert config_builders.server_config({}).tls is None


@pytest.mark.parametrize(
    ("values", "blamed"),
    [
        ({"tls_cert": "c"}, "tls_key"),
        ({"tls_key": "k"}, "tls_cert"),
        ({"tls_client_ca": "ca"}, "tls_client_ca"),
        ({"executor_listen": "127.0.0.1:0"}, "executor_listen"),
        ({"tls_cert": "c", "tls_key": "k", "executor_listen": "127.0.0.1:0"}, "executor_listen"),
    ],
)
def test_incomplete_server_tls_is_refused_naming_the_setting(values: dict[str, str], blamed: str) -> None:
    with pytest.raises(SettingsError) as refused:
        config_builders.server_config(
            {k: Path(v) if k != "executor_listen" else v for k, v in values.items()}
        )
    assert refused.value.setting.name == blamed


def test_a_client_certificate_without_its_key_is_refused(tmp_path: Path) -> None:
    with pytest.raises(SettingsError) as refused:
        config_builders.executor_config({"tls_client_cert": tmp_path / "client.pem"})
    assert refused.value.setting.name == "tls_client_key"


def test_jobmesh_server_says_loudly_when_it_serves_a_public_address_in_plaintext(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    served: list[tuple[object, ...]] = []
    monkeypatch.setattr(assembly, "run_server", lambda *args: _record(served, args))
    store = ["--database-url", f"sqlite:///{tmp_path / 'db.sqlite3'}", "--workers", "1"]
    assert cli.main(["server", "--listen", "0.0.0.0:0", *store]) == 0
    warned = capsys.readouterr().err
    assert "WARNING: gRPC on 0.0.0.0:0 is served without TLS and without authentication" in warned
    assert cli.main(["server", "--listen", "127.0.0.1:0", *store]) == 0
    assert "WARNING" not in capsys.readouterr().err
    assert len(served) == 2


def test_every_process_warns_of_a_credential_file_anyone_may_read(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    started: list[tuple[object, ...]] = []
    monkeypatch.setattr(assembly, "run_executor", lambda *args: _record(started, args))
    token = tmp_path / "executor.token"
    token.write_text("jm_token")
    token.chmod(0o644)
    assert cli.main(["executor", "--token-file", str(token)]) == 0
    assert f"WARNING: {token} is readable by anyone on this machine" in capsys.readouterr().err
    token.chmod(0o600)
    assert cli.main(["executor", "--token-file", str(token)]) == 0
    assert "WARNING" not in capsys.readouterr().err
    assert len(started) == 2
