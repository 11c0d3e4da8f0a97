"""A handler's result: encoded by the executor, checked again by the server, kept only on a success."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from jobmesh.core.attempts import AttemptOutcome
from jobmesh.core.limits import MAX_RESULT_BYTES
from jobmesh.core.records import RunState
from jobmesh.core.results import ResultRefused, check_result, encode_result, with_result

NOW = datetime(2026, 12, 5, tzinfo=UTC)


def test_a_value_is_compact_json_and_none_is_no_result() -> None:
    assert encode_result({"total": 5, "items": [1, 2], "name": "é"}) == '{"total":5,"items":[1,2],"name":"é"}'
    assert encode_result(None) is None
    assert encode_result(0) == "0"


@pytest.mark.parametrize("value", [object(), {1, 2}, float("nan"), b"bytes"])
def test_a_value_json_cannot_write_is_refused_by_name(value: object) -> None:
    with pytest.raises(ResultRefused) as refused:
        encode_result(value)
    assert refused.value.error_type == "ResultNotSerializable"


def test_a_lone_surrogate_is_escaped_so_that_protobuf_and_the_database_take_it() -> None:
    text = encode_result(["é", "\udcff"])
    assert text == '["\\u00e9","\\udcff"]'
    assert json.loads(text) == ["é", "\udcff"]


def test_the_cap_counts_utf8_bytes() -> None:
    fits = "é" * ((MAX_RESULT_BYTES - 2) // 2)  # two bytes each, and the quotes
    assert len(json.dumps(fits, ensure_ascii=False).encode()) <= MAX_RESULT_BYTES
    assert encode_result(fits) is not None
    with pytest.raises(ResultRefused) as refused:
        encode_result(fits + "é")
    assert refused.value.error_type == "ResultTooLarge"
    assert f"{MAX_RESULT_BYTES:,}" in refused.value.message


def test_a_reported_result_must_be_json() -> None:
    check_result('{"a": 1}')
    with pytest.raises(ResultRefused) as refused:
        check_result("{not json")
    assert refused.value.error_type == "ResultNotSerializable"


def _outcome(state: RunState) -> AttemptOutcome:
    return AttemptOutcome(state=state, end_time=NOW)


def test_only_a_success_keeps_its_result() -> None:
    assert with_result(_outcome(RunState.SUCCEEDED), "[1]").result == "[1]"
    assert with_result(_outcome(RunState.SUCCEEDED), "").result is None
    assert with_result(_outcome(RunState.FAILED), "[1]") == _outcome(RunState.FAILED)


@pytest.mark.parametrize(
    ("text", "error_type"),
    [('"' + "x" * MAX_RESULT_BYTES + '"', "ResultTooLarge"), ("{oops", "ResultNotSerializable")],
)
def test_a_result_the_server_cannot_keep_fails_the_attempt(text: str, error_type: str) -> None:
    kept = with_result(_outcome(RunState.SUCCEEDED), text)
    assert (kept.state, kept.error_type, kept.result) == (RunState.FAILED, error_type, None)
    assert kept.error_message
