"""ExecutorConfig from the environment and flags."""

from __future__ import annotations

import argparse

import pytest

from jobmesh.executor.config import DEFAULT_SERVER, ExecutorConfig
from jobmesh.executor.main import add_arguments, config_from_args


def test_defaults() -> None:
    config = ExecutorConfig.from_env({})
    assert (config.server, config.queues, config.cancel_grace, config.drain_grace) == (
        DEFAULT_SERVER,
        ("default",),
        5.0,
        30.0,
    )
    assert config.executor_id != ExecutorConfig.from_env({}).executor_id  # unique per instance


def test_environment_then_flags() -> None:
    env = {
        "JOBMESH_SERVER": "server:1",
        "JOBMESH_QUEUE_URL": "kafka://k:9092",
        "JOBMESH_SIGNALS_URL": "redis://r:6379/0",
        "JOBMESH_QUEUES": "gpu, default",
        "JOBMESH_CONCURRENCY": "3",
        "JOBMESH_CANCEL_GRACE": "0.5",
        "JOBMESH_DRAIN_GRACE": "7",
    }
    config = ExecutorConfig.from_env(env)
    assert (config.server, config.queue_url, config.signals_url) == (
        "server:1",
        "kafka://k:9092",
        "redis://r:6379/0",
    )
    assert (config.queues, config.concurrency, config.cancel_grace, config.drain_grace) == (
        ("gpu", "default"),
        3,
        0.5,
        7.0,
    )
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    flagged = config_from_args(
        parser.parse_args(["--server", "other:2", "--queues", "io", "--executor-id", "x"]), env
    )
    assert (flagged.server, flagged.queues, flagged.executor_id, flagged.concurrency) == (
        "other:2",
        ("io",),
        "x",
        3,
    )


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"JOBMESH_CONCURRENCY": "many"}, "JOBMESH_CONCURRENCY"),
        ({"JOBMESH_CONCURRENCY": "0"}, "concurrency"),
        ({"JOBMESH_QUEUES": " , "}, "queues"),
        ({"JOBMESH_CANCEL_GRACE": "-1"}, "cancel_grace"),
    ],
)
def test_bad_values_are_refused_with_their_name(env: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ExecutorConfig.from_env(env)
