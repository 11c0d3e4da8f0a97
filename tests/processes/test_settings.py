"""The settings model: every `JOBMESH_*` variable, its flag, its checks, and the configs built from them."""

from __future__ import annotations

import dataclasses
import os
import re
from datetime import timedelta
from pathlib import Path

import pytest

from jobmesh.core.errors import InvalidConfig
from jobmesh.core.flow_control import Pacing
from jobmesh.executor.config import ExecutorConfig
from jobmesh.executor.policy import ExecutionPolicy
from jobmesh.processes import assembly, config_builders, setting_parsers, settings
from jobmesh.processes import command as cli
from jobmesh.processes.dashboard import DashboardConfig
from jobmesh.processes.logs import LogSettings
from jobmesh.server.config import ServerConfig
from jobmesh.watcher.config import WatcherConfig

REPO = Path(__file__).resolve().parents[2]

# A value each variable must refuse. Every documented variable (aliases included) needs one: a new setting
# without a bad-value check here fails `test_every_variable_has_a_bad_value_case`.
BAD_VALUES = {
    "JOBMESH_DATABASE_URL": "mysql://root@db/jobs",
    "JOBMESH_QUEUE_URL": "amqp://rabbit:5672",
    "JOBMESH_KAFKA_BOOTSTRAP": "kafka-without-port",
    "JOBMESH_SIGNALS_URL": "memcached://cache:11211",
    "JOBMESH_REDIS_URL": "localhost:6379",
    "JOBMESH_RETENTION_DAYS": "thirty",
    "JOBMESH_LISTEN": "127.0.0.1:99999",
    "JOBMESH_SERVER_WORKERS": "0",
    "JOBMESH_MAX_PENDING_CREATES": "lots",
    "JOBMESH_MAX_STREAM_LAG": "0s",
    "JOBMESH_MAX_LOOP_LAG": "soon",
    "JOBMESH_MAX_LIVE_STREAMS": "0",
    "JOBMESH_MAX_LIVE_STREAMS_PER_CLIENT": "many",
    "JOBMESH_WATCH_BUFFER_RUNS": "10",  # parses, but it is less than a page of the feed
    "JOBMESH_WATCHER_ID": "has spaces",
    "JOBMESH_WATCHER_SCAN_INTERVAL": "0s",
    "JOBMESH_WATCHER_WINDOW": "-5m",
    "JOBMESH_WATCHER_LEAD": "soon",
    "JOBMESH_WATCHER_LEASE_TTL": "500ms",  # parses, but a lease must outlive its 1 s renewal
    "JOBMESH_WATCHER_SHARD_LEASE_TTL": "400ms",  # parses, but a lease must outlive its 500 ms renewal
    "JOBMESH_WATCHER_SHARD_LEASE_RENEW": "-1s",
    "JOBMESH_WATCHER_RECONCILE_INTERVAL": "0s",
    "JOBMESH_WATCHER_SWEEP_INTERVAL": "1 fortnight",
    "JOBMESH_WATCHER_REQUEUE_AFTER": "nan",
    "JOBMESH_SERVER": "no port here",
    "JOBMESH_QUEUES": "Upper,CASE",
    "JOBMESH_CONCURRENCY": "0",
    "JOBMESH_EXECUTOR_ID": "-starts-with-a-dash",
    "JOBMESH_CANCEL_GRACE": "5 minutes",
    "JOBMESH_ALLOWED_COMMANDS": "sh,bin/*",
    "JOBMESH_ALLOWED_HOSTS": ",",
    "JOBMESH_ALLOWED_NETWORKS": "10.0.0.0/33",
    "JOBMESH_ALLOWED_PORTS": "80,65536",
    "JOBMESH_ALLOWED_SCHEMES": "ftp",
    "JOBMESH_COMMAND_PATH": "bin:/usr/bin",
    "JOBMESH_SECRETS": "vault://secrets",
    "JOBMESH_SECRET_QUEUES": "TOKEN=Upper",
    "JOBMESH_ISOLATION": "chroot",
    "JOBMESH_JOB_USER": "no-such-user-here",
    "JOBMESH_JOB_MEMORY": "lots",
    "JOBMESH_JOB_CPU_SECONDS": "0",
    "JOBMESH_JOB_PROCESSES": "-1",
    "JOBMESH_JOB_FILE_SIZE": "1 TB",
    "JOBMESH_DRAIN_GRACE": "1e9999",
    "JOBMESH_HANDLERS": "no_such_module_xyz:HANDLERS",  # well formed, but it does not import
    "JOBMESH_DASHBOARD": "maybe",
    "JOBMESH_DEMO": "sometimes",
    "JOBMESH_DASHBOARD_HOSTS": "http://evil",
    "JOBMESH_QUOTA_JOBS": "-5",
    "JOBMESH_QUOTA_CRON_JOBS": "many",
    "JOBMESH_QUOTA_MIN_CRON_INTERVAL": "soon",
    "JOBMESH_QUOTA_RUNS_PER_MINUTE": "0.5",
    "JOBMESH_QUOTA_ATTEMPT_LOG_BYTES": "10 megabytes",
    "JOBMESH_QUEUE_RATE_LIMITS": "io=fast",
    "JOBMESH_QUEUE_CONCURRENCY_LIMITS": "io=0",
    "JOBMESH_NAMESPACE_QUOTAS": "team-a:jobs=lots",
    "JOBMESH_DASHBOARD_LISTEN": "127.0.0.1:0",  # a browser needs a real port
    "JOBMESH_ATTEMPT_LOG_BYTES": "10 megabytes",
    "JOBMESH_ATTEMPT_LOG_LINES": "-5",
    "JOBMESH_MAX_LIVE_STREAMS_PER_CALLER": "0",
    "JOBMESH_AUTHENTICATION": "on",  # parses, but no credential source is configured
    "JOBMESH_OPEN_SERVICES": "health,jobs",
    "JOBMESH_TOKEN_HASHES": "/no/such/tokens.yaml",
    "JOBMESH_JWT_PUBLIC_KEYS": "/no/such/key.pem",
    "JOBMESH_JWT_JWKS_FILE": "/no/such/jwks.json",
    "JOBMESH_JWT_ISSUER": "https://issuer.example",  # parses, but there is no key to check JWTs with
    "JOBMESH_JWT_AUDIENCE": "jobmesh",  # the same
    "JOBMESH_JWT_ALGORITHMS": "RS256,HS256",
    "JOBMESH_JWT_LEEWAY": "a little",
    "JOBMESH_CALLER_RATE": "0",
    "JOBMESH_CALLER_BURST": "none",
    "JOBMESH_TOKEN": " ",
    "JOBMESH_TOKEN_FILE": "/no/such/exec.token",
    "JOBMESH_TLS_CERT": "/no/such/server.pem",
    "JOBMESH_TLS_KEY": "/no/such/server.key",
    "JOBMESH_TLS_CLIENT_CA": "/no/such/ca.pem",
    "JOBMESH_EXECUTOR_LISTEN": "everywhere",
    "JOBMESH_HEALTH_LISTEN": "port-8081",
    "JOBMESH_LOG_LEVEL": "loud",
    "JOBMESH_JOURNAL_DIR": " ",
    "JOBMESH_LOG_FORMAT": "xml",
    "JOBMESH_EXECUTOR_CERTIFICATES": "executor-1",  # no queue granted
    "JOBMESH_ALLOW_INSECURE_PUBLIC": "perhaps",
    "JOBMESH_TLS_CA": "/no/such/ca.pem",
    "JOBMESH_TLS_CLIENT_CERT": "/no/such/client.pem",
    "JOBMESH_TLS_CLIENT_KEY": "/no/such/client.key",
    "JOBMESH_TLS_SERVER_NAME": "not a name",
}


def _variables() -> list[tuple[str, settings.Setting]]:
    return [(variable, setting) for setting in settings.SETTINGS for variable in setting.variables]


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """No JOBMESH_* variable but the test's own, and no process ever starts: a value the settings let
    through by mistake fails the test instead of serving forever."""
    for name in list(os.environ):
        if name.startswith("JOBMESH_"):
            monkeypatch.delenv(name)
    for name in ("run_dev", "run_server", "run_watcher", "run_executor", "run_migrations"):
        monkeypatch.setattr(assembly, name, _must_not_start)


def _must_not_start(*args: object) -> None:
    raise AssertionError("a process started although its settings are bad")


def test_every_variable_has_a_bad_value_case() -> None:
    assert sorted(BAD_VALUES) == sorted(variable for variable, _ in _variables())


@pytest.mark.parametrize(("variable", "setting"), _variables(), ids=[v for v, _ in _variables()])
def test_a_bad_value_stops_every_command_that_takes_it_naming_the_variable(
    variable: str,
    setting: settings.Setting,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv(variable, BAD_VALUES[variable])
    for command in sorted(setting.commands):
        assert cli.main([command]) == 2, command
        error = capsys.readouterr().err
        assert variable in error, (command, error)
        assert setting.flag in error
        assert "Traceback" not in error


def test_several_server_workers_on_an_in_process_queue_are_refused(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("JOBMESH_SERVER_WORKERS", "2")
    assert cli.main(["server"]) == 2
    error = capsys.readouterr().err
    assert "--workers" in error
    assert "memory://" in error


def test_server_workers_default_to_the_cores_with_shared_adapters_and_to_one_without() -> None:
    shared = config_builders.Connections(
        queue_url="kafka://127.0.0.1:9092", signals_url="redis://127.0.0.1:6379/0"
    )
    assert config_builders.server_workers({}, shared) == (os.cpu_count() or 1)
    assert config_builders.server_workers({}, config_builders.Connections()) == 1
    assert config_builders.server_workers({"workers": 3}, shared) == 3


def test_a_url_with_a_password_is_not_echoed(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("JOBMESH_DATABASE_URL", "mysql://admin:hunter2@db/jobs")
    monkeypatch.setenv("JOBMESH_SIGNALS_URL", "memcached://admin:hunter2@cache")
    assert cli.main(["server"]) == 2
    assert cli.main(["executor"]) == 2
    assert "hunter2" not in capsys.readouterr().err


def test_an_empty_variable_is_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JOBMESH_CONCURRENCY", "")
    assert cli.resolved("executor")["concurrency"] is None
    assert (
        config_builders.executor_config(cli.resolved("executor")).concurrency == ExecutorConfig().concurrency
    )


def test_flags_win_over_the_environment_which_wins_over_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JOBMESH_CONCURRENCY", "3")
    monkeypatch.setenv("JOBMESH_QUEUES", "gpu, default")
    monkeypatch.setenv("JOBMESH_CANCEL_GRACE", "1.5")
    monkeypatch.setenv("JOBMESH_KAFKA_BOOTSTRAP", "k:9092")
    values = cli.resolved("executor", ["--queues", "io", "--executor-id", "x"])
    config = config_builders.executor_config(values)
    assert (config.queues, config.executor_id, config.concurrency) == (("io",), "x", 3)
    assert config.cancel_grace == timedelta(seconds=1.5)
    assert config.queue_url == "k:9092"
    assert config.signals_url == config_builders.EMBEDDED
    assert config.drain_grace == ExecutorConfig().drain_grace


def test_the_documented_variable_wins_over_its_alias(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JOBMESH_KAFKA_BOOTSTRAP", "old:9092")
    monkeypatch.setenv("JOBMESH_QUEUE_URL", "kafka://new:9092?partitions=6")
    monkeypatch.setenv("JOBMESH_REDIS_URL", "redis://old:6379/0")
    connections = config_builders.connections(cli.resolved("server"))
    assert connections.queue_url == "kafka://new:9092?partitions=6"
    assert connections.signals_url == "redis://old:6379/0"


def test_watcher_durations(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JOBMESH_WATCHER_SCAN_INTERVAL", "2.5")
    monkeypatch.setenv("JOBMESH_WATCHER_WINDOW", "90s")
    monkeypatch.setenv("JOBMESH_WATCHER_LEAD", "250ms")
    config = config_builders.watcher_config(cli.resolved("watcher", ["--requeue-after", "1h"]))
    assert (config.scan_interval, config.window, config.lead, config.requeue_after) == (
        timedelta(seconds=2.5),
        timedelta(seconds=90),
        timedelta(milliseconds=250),
        timedelta(hours=1),
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("0", timedelta(0)),
        ("1.5", timedelta(seconds=1.5)),
        (".5s", timedelta(milliseconds=500)),
        ("500ms", timedelta(milliseconds=500)),
        ("20s", timedelta(seconds=20)),
        ("5m", timedelta(minutes=5)),
        ("2h", timedelta(hours=2)),
        ("1d", timedelta(days=1)),
        (" 7 s ", timedelta(seconds=7)),
    ],
)
def test_durations(text: str, expected: timedelta) -> None:
    assert setting_parsers.duration(text) == expected


@pytest.mark.parametrize(
    "text", ["", "s", "-1s", "1x", "1.2.3s", "inf", "1e3", "99999999999999999d", "1m30s"]
)
def test_bad_durations(text: str) -> None:
    with pytest.raises(ValueError, match="duration"):
        setting_parsers.duration(text)


def test_the_executor_takes_no_database_and_the_migration_no_queue() -> None:
    assert "--database-url" not in _help("executor")
    assert "JOBMESH_DATABASE_URL" not in _help("executor")
    assert "--queue-url" not in _help("migrate")
    for command in ("dev", "server", "watcher", "migrate"):
        assert "JOBMESH_DATABASE_URL" in _help(command)


def test_help_names_each_option_and_its_variable() -> None:
    for command in settings.COMMANDS:
        text = _help(command)
        for setting in settings.settings_of(command):
            assert setting.flag in text
            for variable in setting.variables:
                assert variable in text


# Settings whose default is nothing at all (no file, no token).
_UNSET = (
    "health_listen",
    "executor_certificates",
    "secret_queues",
    "namespace_quotas",
    "queue_rate_limits",
    "queue_concurrency_limits",
    "token_hashes_file",
    "jwt_public_keys",
    "jwt_jwks_file",
    "jwt_issuer",
    "jwt_audience",
    "token",
    "token_file",
)


def test_documented_defaults_are_the_components_defaults() -> None:
    defaults = {
        **_field_defaults(ServerConfig()),
        **_field_defaults(WatcherConfig()),
        **_field_defaults(ExecutorConfig()),
        **_field_defaults(ExecutionPolicy()),
        **_field_defaults(config_builders.Connections()),
        **_field_defaults(DashboardConfig()),
        **_field_defaults(LogSettings()),
    }
    for setting in settings.SETTINGS:
        match = re.fullmatch(r"`([^`]*)`(?: \(.*\))?", setting.default)
        documented = match.group(1) if match else setting.default
        per_machine = (
            "database_url",
            "watcher_id",
            "executor_id",
            "handlers",
            "workers",
            "job_user",
            "journal_dir",
        )
        if setting.name in (*per_machine, *_UNSET) or (
            setting.name.startswith("tls_") or setting.name in ("executor_listen", "allow_insecure_public")
        ):
            continue  # made per machine or process, or nothing: the table says how
        expected = (
            config_builders.EMBEDDED
            if setting.name in ("queue_url", "signals_url")
            else defaults[setting.name]
        )
        assert setting.parse(documented) == expected, setting.name


def test_the_readme_table_is_the_settings_table() -> None:
    readme = (REPO / "README.md").read_text()
    assert settings.markdown_table() in readme


def test_only_the_settings_model_reads_the_environment() -> None:
    """Components get the environment as a mapping where they must (a command's HOME and LANG, the secrets
    of an `env:` source); nothing but the settings model reads it."""
    readers = []
    for folder in ("core", "adapters", "server", "watcher", "executor", "processes"):
        for path in (REPO / folder).rglob("*.py"):
            if path.name != "settings.py" and re.search(r"environ\.get|environ\[|getenv", path.read_text()):
                readers.append(str(path.relative_to(REPO)))
    assert readers == []


def _help(command: str) -> str:
    target = cli.jobmesh.commands[command]
    with target.make_context(command, [], resilient_parsing=True) as context:
        return target.get_help(context)


def _field_defaults(config: object) -> dict[str, object]:
    return {field.name: getattr(config, field.name) for field in dataclasses.fields(config)}  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("text", "expected"),
    [("1", 1), ("512KiB", 512 * 1024), ("10MiB", 10 * 2**20), ("10m", 10 * 2**20), ("1 GiB", 2**30)],
)
def test_sizes(text: str, expected: int) -> None:
    assert setting_parsers.size(text) == expected


@pytest.mark.parametrize("text", ["", "0", "-1", "1.5MiB", "10 MB", "2TiB", "1" * 20])
def test_bad_sizes(text: str) -> None:
    with pytest.raises(ValueError, match="size"):
        setting_parsers.size(text)


def test_namespace_quotas_override_the_defaults_one_by_one() -> None:
    own = settings.namespace_quotas(
        " team-a:jobs=5000 , team-a:runs_per_minute=none,"
        "batch:min_cron_interval=1m,batch:attempt_log_bytes=1MiB"
    )
    quotas = ServerConfig(quota_jobs=10, namespace_quotas=own).quotas
    assert quotas.of("team-a") == dataclasses.replace(quotas.defaults, jobs=5000, runs_per_minute=0)
    assert quotas.of("batch") == dataclasses.replace(
        quotas.defaults, min_cron_interval=timedelta(minutes=1), attempt_log_bytes=2**20
    )
    assert quotas.of("other") == quotas.defaults
    assert quotas.defaults.jobs == 10


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "expected NAMESPACE:QUOTA=LIMIT"),
        ("team-a", "expected NAMESPACE:QUOTA=LIMIT"),
        ("team-a:jobs", "expected NAMESPACE:QUOTA=LIMIT"),
        ("team-a:jobs=", "expected NAMESPACE:QUOTA=LIMIT"),
        ("jobs=5", "expected NAMESPACE:QUOTA=LIMIT"),
        ("Team-A:jobs=5", "'Team-A' is not a namespace"),
        (":jobs=5", "'' is not a namespace"),
        ("team-a:job=5", "'job' is not a quota: one of jobs, cron_jobs"),
        ("team-a:caller_rate=5", "'caller_rate' is not a quota"),
        ("team-a:jobs=-5", "team-a:jobs: expected a whole number"),
        ("team-a:runs_per_minute=0.5", "team-a:runs_per_minute: expected a whole number"),
        ("team-a:min_cron_interval=soon", "team-a:min_cron_interval: expected a duration"),
        ("team-a:attempt_log_bytes=10 megabytes", "team-a:attempt_log_bytes: expected a size"),
        ("team-a:jobs=5,team-a:jobs=6", "team-a:jobs is given twice"),
    ],
)
def test_malformed_namespace_quotas_are_refused(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        settings.namespace_quotas(text)


def test_a_server_config_refuses_quotas_of_no_namespace_or_no_quota() -> None:
    with pytest.raises(InvalidConfig, match="'Team' is not a namespace"):
        ServerConfig(namespace_quotas={"Team": {"jobs": 5}})
    with pytest.raises(InvalidConfig, match="'rate' is not a quota"):
        ServerConfig(namespace_quotas={"team": {"rate": 5}})


def test_secret_queues_reach_the_server_and_the_executor_alike(monkeypatch: pytest.MonkeyPatch) -> None:
    """The server refuses such a job at create, the executor at resolution: `jobmesh dev` gives both its
    one list, and `jobmesh server` and `jobmesh executor` each take it."""
    monkeypatch.setenv("JOBMESH_SECRET_QUEUES", "team-a/DB=db+reports")
    dev = cli.resolved("dev", ["--secret-queues", "TOKEN=mail"])
    expected = {("default", "TOKEN"): frozenset({"mail"})}
    assert config_builders.server_config(dev).secret_queues.granted == expected
    assert config_builders.executor_config(dev, dev=True).secret_queues.granted == expected
    from_environment = {("team-a", "DB"): frozenset({"db", "reports"})}
    assert config_builders.server_config(cli.resolved("server")).secret_queues.granted == from_environment
    assert config_builders.executor_config(cli.resolved("executor")).secret_queues.granted == from_environment


def test_queue_rate_limits_reach_the_server(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JOBMESH_QUEUE_RATE_LIMITS", "io=10, reports=0.5")
    config = config_builders.server_config(cli.resolved("server"))
    assert config.queue_rate_limits == {"io": Pacing(10), "reports": Pacing(0.5)}


def test_queue_concurrency_limits_reach_the_server(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JOBMESH_QUEUE_CONCURRENCY_LIMITS", "io=3, reports = 1")
    config = config_builders.server_config(cli.resolved("server"))
    assert config.queue_concurrency_limits == {"io": 3, "reports": 1}
