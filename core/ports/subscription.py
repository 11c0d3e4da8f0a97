"""What a port hands back for a callback it will call: closing it stops the calls."""

from __future__ import annotations

from typing import Protocol


class Subscription(Protocol):
    def close(self) -> None: ...
