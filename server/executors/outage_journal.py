"""The server's write-ahead journal of what executors reported while the database was away: claims it granted
(fenced on the signal bus), results, log lines and progress, in the order they came, each written and synced
to a file of this server process's own before it is answered, and applied in that order once the database is
back (`server/executors/outage_mode.py`).

A file, not a Kafka topic: the database and Kafka may be away together, and a local disk is there whenever
the process is. A host lost with its journal loses only what it held: the fences still keep every attempt
from starting twice, and the sweeper retries attempts whose results never arrive.

Each record is a length, a CRC-32 of the rest, the report's time (nanoseconds since the epoch), the
executor's name and the executor's `ConnectRequest` as it came. A record cut short by a crash fails its length
or checksum, and it and what follows are ignored, and removed when the journal is next opened (records
appended after it would never be read).
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import struct
import threading
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO

from jobmesh.control.v1 import executor_control_pb2 as pb

log = logging.getLogger(__name__)
_HEADER = struct.Struct(">II")  # length of what follows the header, CRC-32 of it
_BODY = struct.Struct(">qH")  # time in ns, length of the executor's name
_NANOS = 1_000_000_000


@dataclass(frozen=True, slots=True)
class JournalEntry:
    executor: str
    request: pb.ConnectRequest
    at: datetime


class OutageJournal:
    """One process's journal file, used from any thread. `open()` takes it for this process alone (a lock on
    the file), so that two processes never append to, or replay, one journal."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._file: IO[bytes] | None = None
        self._count = 0

    def open(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        handle = self.path.open("ab+")
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.close()
            raise
        self._file = handle
        data = self.path.read_bytes()
        whole = _whole_records(data)
        self._count = len(whole)
        end = whole[-1][1] if whole else 0
        if end < len(data):  # a record cut short by a crash: what is appended now must not follow it
            log.warning("journal %s: a record cut short at byte %d (a crash): removed", self.path, end)
            handle.truncate(end)
            handle.flush()
            os.fsync(handle.fileno())

    def close(self) -> None:
        with self._lock:
            if self._file is not None:
                self._file.close()  # releases the lock
                self._file = None

    def __len__(self) -> int:
        return self._count

    def append(self, executor: str, request: pb.ConnectRequest, at: datetime) -> None:
        """Written and synced when it returns: only then may the report be answered."""
        name = executor.encode()
        body = _BODY.pack(int(at.timestamp() * _NANOS), len(name)) + name + request.SerializeToString()
        record = _HEADER.pack(len(body), zlib.crc32(body)) + body
        with self._lock:
            handle = self._opened()
            handle.seek(0, os.SEEK_END)
            handle.write(record)
            handle.flush()
            os.fsync(handle.fileno())
            self._count += 1

    def entries(self) -> Iterator[JournalEntry]:
        """The records in the order written, up to the first one cut short."""
        data = self.path.read_bytes() if self.path.exists() else b""
        whole = _whole_records(data)
        end = whole[-1][1] if whole else 0
        if end < len(data):
            log.warning("journal %s: a record cut short at byte %d (a crash): ignored", self.path, end)
        for start, stop in whole:
            yield _entry(data[start:stop])

    def drop_first(self, count: int) -> None:
        """The first `count` records have been applied: the file keeps those after them (appended since,
        perhaps), rewritten in place under the lock."""
        with self._lock:
            handle = self._opened()
            handle.seek(0)
            data = handle.read()
            offset = 0
            for _ in range(count):
                length, _checksum = _HEADER.unpack_from(data, offset)
                offset += _HEADER.size + length
            handle.seek(0)
            handle.truncate(0)
            handle.write(data[offset:])
            handle.flush()
            os.fsync(handle.fileno())
            self._count = max(self._count - count, 0)

    def _opened(self) -> IO[bytes]:
        if self._file is None:
            raise RuntimeError("the journal is not open")
        return self._file


def _whole_records(data: bytes) -> list[tuple[int, int]]:
    """Where the body of each record starts and ends, up to the first record cut short."""
    found, offset = [], 0
    while offset + _HEADER.size <= len(data):
        length, checksum = _HEADER.unpack_from(data, offset)
        start, stop = offset + _HEADER.size, offset + _HEADER.size + length
        if stop > len(data) or zlib.crc32(data[start:stop]) != checksum:
            break
        found.append((start, stop))
        offset = stop
    return found


def _entry(body: bytes) -> JournalEntry:
    nanos, name_length = _BODY.unpack_from(body)
    start = _BODY.size
    executor = body[start : start + name_length].decode()
    request = pb.ConnectRequest.FromString(body[start + name_length :])
    return JournalEntry(executor, request, datetime.fromtimestamp(nanos / _NANOS, UTC))


@contextlib.contextmanager
def opened_journal(path: Path) -> Iterator[OutageJournal]:
    journal = OutageJournal(path)
    journal.open()
    try:
        yield journal
    finally:
        journal.close()
