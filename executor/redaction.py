"""Redaction of resolved secret values from what an attempt sends: its output and its error text.

A command's output arrives in chunks of whatever size its pipe delivers, so a value can be split between two
chunks. `OutputRedactor` holds back the end of a chunk that could be the start of a value until the next
chunk (or the end of the output) decides; it works on bytes before the output is cut into lines, so a value
that spans a line break or the line-length split is caught too.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = ["MASK", "OutputRedactor", "Redactor"]

MASK = "[secret]"


class Redactor:
    """The values of one attempt's secrets (empty ones ignored)."""

    def __init__(self, values: Iterable[str]) -> None:
        self._values = sorted({value for value in values if value}, key=len, reverse=True)
        self._pattern = re.compile("|".join(re.escape(value) for value in self._values))

    def __bool__(self) -> bool:
        return bool(self._values)

    def text(self, text: str) -> str:
        return self._pattern.sub(MASK, text) if self._values else text

    def output(self) -> OutputRedactor:
        return OutputRedactor([value.encode() for value in self._values])


class OutputRedactor:
    """One output stream's redaction: `feed` returns what is safe to pass on, `flush` the rest at its end."""

    def __init__(self, values: list[bytes]) -> None:
        self._values = values
        self._pattern = re.compile(b"|".join(re.escape(value) for value in values))
        self._longest = max((len(value) for value in values), default=0)
        self._held = b""

    def feed(self, data: bytes) -> bytes:
        if not self._values:
            return data
        data = self._held + data
        last_end = 0
        for match in self._pattern.finditer(data):
            last_end = match.end()
        cut = self._held_from(data, last_end)
        self._held = data[cut:]
        return self._pattern.sub(MASK.encode(), data[:cut])

    def flush(self) -> bytes:
        held, self._held = self._held, b""
        return self._pattern.sub(MASK.encode(), held) if self._values else held

    def _held_from(self, data: bytes, start: int) -> int:
        """Where the longest end of `data[start:]` that begins some value (but is not all of it) starts."""
        for at in range(max(start, len(data) - self._longest + 1), len(data)):
            tail = data[at:]
            if any(value.startswith(tail) for value in self._values):
                return at
        return len(data)
