"""Text that users and their jobs supply (error messages, log lines, progress messages), made storable and
sendable.

A database rejects NUL in text (PostgreSQL), and protobuf rejects strings that are not UTF-8 (a lone
surrogate, from bytes decoded with `surrogateescape`): either would fail a write or a message over and over.
Such characters become U+FFFD, and the text is cut to `limit` characters.
"""

from __future__ import annotations

REPLACEMENT = "\ufffd"


def storable(text: str, limit: int) -> str:
    text = text[:limit].replace("\x00", REPLACEMENT)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # rare: only then is each character looked at
        text = "".join(REPLACEMENT if 0xD800 <= ord(char) <= 0xDFFF else char for char in text)
    return text
