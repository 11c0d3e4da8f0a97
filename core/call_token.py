"""The bearer token a client of the mesh presents (an executor, the demo): `authorization: Bearer TOKEN`
metadata on each call. It is call metadata rather than channel credentials, so it rides a plaintext channel on
loopback and a TLS channel alike."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["CallToken"]


@dataclass(frozen=True, slots=True)
class CallToken:
    """The token itself, or a file that holds it (read at every use, so a rotated token needs no restart).
    Neither: calls carry no token."""

    token: str = field(default="", repr=False)
    file: Path | None = None

    def metadata(self) -> tuple[tuple[str, str], ...]:
        """The call metadata; OSError when the token file cannot be read."""
        token = self.token or (self.file.read_text().strip() if self.file is not None else "")
        return (("authorization", f"Bearer {token}"),) if token else ()
