"""A handler's result: its return value as JSON text, capped at `MAX_RESULT_BYTES`. The executor encodes it,
the server checks it again (an executor in another language may not), and the run keeps it."""

from __future__ import annotations

import json
from dataclasses import replace

from jobmesh.core.attempts import AttemptOutcome
from jobmesh.core.limits import MAX_RESULT_BYTES, RESULT_NOT_SERIALIZABLE, RESULT_TOO_LARGE
from jobmesh.core.records import RunState


class ResultRefused(Exception):
    """A return value that cannot be kept; the attempt fails with `error_type`."""

    def __init__(self, error_type: str, message: str) -> None:
        super().__init__(message)
        self.error_type = error_type
        self.message = message


def encode_result(value: object) -> str | None:
    """JSON text of `value` (None for None: no result)."""
    if value is None:
        return None
    try:
        text = json.dumps(value, allow_nan=False, ensure_ascii=False, separators=(",", ":"))
    except (TypeError, ValueError, RecursionError) as exc:
        raise ResultRefused(
            RESULT_NOT_SERIALIZABLE, f"the return value is not JSON-serialisable: {exc}"
        ) from None
    if not text.isascii():
        try:
            text.encode("utf-8")
        except (
            UnicodeEncodeError
        ):  # a lone surrogate: escaped, since neither protobuf nor the database takes it
            text = json.dumps(value, allow_nan=False, separators=(",", ":"))
    _check_size(text)
    return text


def check_result(text: str) -> None:
    """A reported result (from any executor) is JSON within the cap; ResultRefused says what it is not."""
    _check_size(text)
    try:
        json.loads(text)
    except ValueError as exc:
        raise ResultRefused(RESULT_NOT_SERIALIZABLE, f"the reported result is not JSON text: {exc}") from None


def _check_size(text: str) -> None:
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > MAX_RESULT_BYTES:
        raise ResultRefused(
            RESULT_TOO_LARGE,
            f"the return value is {size:,} bytes of JSON, over the limit of {MAX_RESULT_BYTES:,}:"
            " keep large data elsewhere and return a reference to it",
        )


def with_result(outcome: AttemptOutcome, text: str) -> AttemptOutcome:
    """The outcome with the reported result kept: only a success has one, and one over the cap fails it."""
    if not text or outcome.state is not RunState.SUCCEEDED:
        return outcome
    try:
        check_result(text)
    except ResultRefused as refused:
        return replace(
            outcome, state=RunState.FAILED, error_type=refused.error_type, error_message=refused.message
        )
    return replace(outcome, result=text)
