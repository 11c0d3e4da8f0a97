"""Driver errors become the project's, and their text never reaches a caller: only the server's log."""

from __future__ import annotations

import grpc
import pytest
from sqlalchemy import exc as sa_exc

from jobmesh.adapters.store.sql_engine import translate_errors
from jobmesh.core.errors import StoreFailure, StoreUnavailable

SECRET = 'value "2147483648" is out of range for type integer at host db-7.internal'


class Refusing:
    def __init__(self, error: Exception) -> None:
        self.error = error

    @translate_errors
    def write(self) -> None:
        raise self.error


@pytest.mark.parametrize(
    ("error", "expected", "code"),
    [
        (sa_exc.DataError("UPDATE …", {}, Exception(SECRET)), StoreFailure, grpc.StatusCode.INTERNAL),
        (sa_exc.IntegrityError("INSERT …", {}, Exception(SECRET)), StoreFailure, grpc.StatusCode.INTERNAL),
        (
            sa_exc.OperationalError("SELECT 1", {}, Exception(SECRET)),
            StoreUnavailable,
            grpc.StatusCode.UNAVAILABLE,
        ),
    ],
)
def test_a_callers_message_holds_nothing_of_the_database(
    error: Exception, expected: type[Exception], code: grpc.StatusCode
) -> None:
    with pytest.raises(expected) as raised:
        Refusing(error).write()
    assert raised.value.code == code  # type: ignore[attr-defined]
    assert "db-7" not in raised.value.message  # type: ignore[attr-defined]
    assert "db-7" in str(raised.value)  # the log's text keeps the detail
