"""Etags: a job's version, and strings that only look like one."""

from __future__ import annotations

import pytest

from jobmesh.core.records import etag_of, version_of_etag


def test_an_etag_is_its_version() -> None:
    assert version_of_etag(etag_of(42)) == 42


@pytest.mark.parametrize("etag", ["", "²", "¹²", "٣", "1.0", "-1", " 1", "1" * 19, 'W/"1"'])
def test_what_no_etag_of_ours_looks_like_names_no_version(etag: str) -> None:
    assert version_of_etag(etag) is None
