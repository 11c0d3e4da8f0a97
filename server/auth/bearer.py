"""The bearer token of a call: `authorization: Bearer TOKEN` in its metadata."""

from __future__ import annotations

from collections.abc import Mapping

from jobmesh.core.errors import Unauthenticated

__all__ = ["AUTHORIZATION", "bearer_token"]

AUTHORIZATION = "authorization"
_SCHEME = "bearer "


def bearer_token(metadata: Mapping[str, str]) -> str | None:
    """The token; None when the call has no `authorization` metadata. Unauthenticated for one that is not a
    bearer token."""
    value = metadata.get(AUTHORIZATION)
    if value is None:
        return None
    if not value[: len(_SCHEME)].lower() == _SCHEME or not value[len(_SCHEME) :].strip():
        raise Unauthenticated("the authorization metadata is not `Bearer TOKEN`")
    return value[len(_SCHEME) :].strip()
