"""Helpers shared by the test suites."""

from __future__ import annotations

import os

import pytest


def require_service_url(variable: str) -> str:
    """Return the URL of a real service from the environment.

    Integration tests must not pass by accident: when the service is missing they
    fail under CI (``CI=true``) and are skipped only on a developer's machine.
    """
    value = os.environ.get(variable, "").strip()
    if value:
        return value
    message = f"{variable} is not set: start the services with `make services` or run `make test`"
    if os.environ.get("CI", "").lower() in {"1", "true", "yes"}:
        pytest.fail(message)
    pytest.skip(message)
