"""User text made storable: NUL and lone surrogates replaced, lengths capped."""

from __future__ import annotations

import pytest

from jobmesh.core.text import REPLACEMENT, storable


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("plain", "plain"),
        ("a\x00b", f"a{REPLACEMENT}b"),
        ("caf\udce9", f"caf{REPLACEMENT}"),  # b"caf\xe9" decoded with surrogateescape
        ("\ud800\udc00", REPLACEMENT * 2),  # a surrogate pair in a str is still not UTF-8
        ("ünïcødé ✓", "ünïcødé ✓"),
    ],
)
def test_what_a_database_or_protobuf_refuses_is_replaced(text: str, expected: str) -> None:
    assert storable(text, 100) == expected
    storable(text, 100).encode("utf-8")


def test_length_is_capped() -> None:
    assert storable("x" * 10, 4) == "xxxx"
