"""The outage journal's file: records round trip, a record cut short ends what is read, applied records are
dropped without losing later ones, and one process at a time holds a journal."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from jobmesh.control.v1 import executor_control_pb2 as pb
from jobmesh.server.executors.outage_journal import JournalEntry, OutageJournal, opened_journal
from jobmesh.v1 import run_pb2

AT = datetime(2030, 5, 17, 8, 30, 15, 123457, tzinfo=UTC)


def claim(number: int) -> pb.ConnectRequest:
    ref = pb.AttemptRef(run=f"jobs/job/runs/run-{number}", attempt=number)
    return pb.ConnectRequest(claims=pb.ClaimBatch(attempts=[ref]))


def result(number: int) -> pb.ConnectRequest:
    ref = pb.AttemptRef(run=f"jobs/job/runs/run-{number}", attempt=1)
    done = pb.AttemptResult(attempt=ref, state=run_pb2.RUN_STATE_SUCCEEDED, exit_code=0)
    return pb.ConnectRequest(results=pb.ResultBatch(results=[done]))


def written(number: int) -> JournalEntry:
    return JournalEntry(
        f"executors/e{number % 3}",
        claim(number) if number % 2 else result(number),
        AT + timedelta(microseconds=number),
    )


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "journals" / "server-1.journal"


@pytest.fixture
def journal(path: Path) -> Iterator[OutageJournal]:
    with opened_journal(path) as opened:
        yield opened


def fill(journal: OutageJournal, count: int, first: int = 0) -> list[JournalEntry]:
    entries = [written(number) for number in range(first, first + count)]
    for entry in entries:
        journal.append(entry.executor, entry.request, entry.at)
    return entries


def record_offsets(path: Path) -> list[int]:
    """Where each record starts (a 4-byte length, a 4-byte checksum, then that many bytes)."""
    data, offsets, offset = path.read_bytes(), [], 0
    while offset < len(data):
        offsets.append(offset)
        offset += 8 + int.from_bytes(data[offset : offset + 4], "big")
    return offsets


def test_entries_come_back_as_written_in_order(journal: OutageJournal) -> None:
    entries = fill(journal, 5)
    unicode_name = JournalEntry(
        "executors/ëxécutor:1", claim(9), datetime(2031, 1, 2, 3, 4, 5, 999999, tzinfo=UTC)
    )
    journal.append(unicode_name.executor, unicode_name.request, unicode_name.at)

    read = list(journal.entries())

    assert read == [*entries, unicode_name]
    assert [entry.at.microsecond for entry in read] == [123457 + n for n in range(5)] + [999999]
    assert all(entry.at.tzinfo is not None for entry in read)
    assert len(journal) == 6


def test_an_empty_or_missing_journal_has_no_entries(tmp_path: Path) -> None:
    assert list(OutageJournal(tmp_path / "never.journal").entries()) == []
    with opened_journal(tmp_path / "empty.journal") as journal:
        assert list(journal.entries()) == []
        assert len(journal) == 0


def test_a_journal_not_open_refuses_writes(path: Path) -> None:
    journal = OutageJournal(path)
    with pytest.raises(RuntimeError, match="not open"):
        journal.append("executors/e1", claim(1), AT)
    with pytest.raises(RuntimeError, match="not open"):
        journal.drop_first(1)


@pytest.mark.parametrize("cut", [1, 7, 12, -1])
def test_a_record_cut_short_is_ignored_with_those_after_it(
    journal: OutageJournal, path: Path, cut: int
) -> None:
    entries = fill(journal, 4)
    third = record_offsets(path)[2]
    data = path.read_bytes()
    end = record_offsets(path)[3]
    # Cut within the third record (in its header, or its body), and the fourth record lost with it.
    path.write_bytes(data[: (third + cut) if cut > 0 else (end + cut)])

    assert list(journal.entries()) == entries[:2]


@pytest.mark.parametrize("where", ["length", "checksum", "body"])
def test_a_damaged_record_is_ignored_with_those_after_it(
    journal: OutageJournal, path: Path, where: str
) -> None:
    entries = fill(journal, 4)
    third = record_offsets(path)[2]
    at = third + {"length": 3, "checksum": 5, "body": 20}[where]
    data = bytearray(path.read_bytes())
    data[at] ^= 0xFF
    path.write_bytes(bytes(data))

    assert list(journal.entries()) == entries[:2]


def test_a_journal_reopened_after_a_torn_write_counts_and_keeps_what_comes_next(path: Path) -> None:
    """A crash mid-append leaves a record cut short at the end: the next process's records must still be
    read, not hidden behind it."""
    with opened_journal(path) as journal:
        before = fill(journal, 3)
    data = path.read_bytes()
    path.write_bytes(data[: record_offsets(path)[2] + 10])  # the third record torn

    with opened_journal(path) as journal:
        assert len(journal) == 2
        after = fill(journal, 2, first=10)
        assert list(journal.entries()) == before[:2] + after
        assert len(journal) == 4
        journal.drop_first(2)
        assert list(journal.entries()) == after
        assert len(journal) == 2


def test_drop_first_keeps_the_later_records(journal: OutageJournal) -> None:
    entries = fill(journal, 5)

    journal.drop_first(2)

    assert list(journal.entries()) == entries[2:]
    assert len(journal) == 3
    journal.drop_first(0)
    assert list(journal.entries()) == entries[2:]
    journal.drop_first(3)
    assert list(journal.entries()) == []
    assert len(journal) == 0
    assert journal.path.stat().st_size == 0


def test_drop_first_keeps_records_appended_after_the_entries_were_read(journal: OutageJournal) -> None:
    first = fill(journal, 3)
    read = list(journal.entries())
    later = fill(journal, 2, first=3)  # while the read ones were being applied

    journal.drop_first(len(read))

    assert read == first
    assert list(journal.entries()) == later
    assert len(journal) == 2
    appended = fill(journal, 1, first=7)
    assert list(journal.entries()) == later + appended


def test_a_second_handle_cannot_open_a_held_journal_until_it_is_closed(path: Path) -> None:
    first, second = OutageJournal(path), OutageJournal(path)
    first.open()
    try:
        fill(first, 1)
        with pytest.raises(BlockingIOError):
            second.open()
        with pytest.raises(RuntimeError, match="not open"):  # the refused handle holds nothing
            second.append("executors/e1", claim(1), AT)
    finally:
        first.close()

    second.open()
    try:
        assert len(second) == 1
        with pytest.raises(BlockingIOError):
            OutageJournal(path).open()
    finally:
        second.close()
    first.close()  # twice is harmless


def test_the_count_survives_reopening(path: Path) -> None:
    with opened_journal(path) as journal:
        entries = fill(journal, 4)
        journal.drop_first(1)

    with opened_journal(path) as journal:
        assert len(journal) == 3
        assert list(journal.entries()) == entries[1:]
        more = fill(journal, 1, first=4)

    with opened_journal(path) as journal:
        assert len(journal) == 4
        assert list(journal.entries()) == entries[1:] + more


def test_a_record_is_on_disk_when_append_returns(journal: OutageJournal, path: Path) -> None:
    entries = fill(journal, 2)
    # Another reader (the next server, after a crash) sees them without the writer closing anything.
    assert list(OutageJournal(path).entries()) == entries
