"""Group commit: the writes of concurrent callers coalesced into one store transaction.

A caller hands its items over and waits. Whoever finds no write under way leads: it takes every item that has
queued (up to `max_items`), writes them in one call, hands each caller its own outcomes, and then passes the
lead to the first caller still waiting. Nothing waits for a batch to fill: an idle store writes a lone item at
once, and a busy one batches what queued while the previous commit ran, so the number of transactions a
second follows the store's commit rate, not the callers' call rate.

A batch that fails for one item's sake (by default `StoreFailure`: the database refused a statement; the
store's own transactions pass a wider `alone`) is written again one caller at a time, so that one caller's bad
item never fails the others; any other failure, such as an unreachable store, fails the whole batch, as it
would fail each call alone.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Sequence
from typing import Generic, TypeVar

from jobmesh.core.errors import StoreFailure

__all__ = ["GroupCommit"]

T = TypeVar("T")
R = TypeVar("R")


class _Ticket(Generic[T, R]):
    __slots__ = ("done", "error", "items", "leads", "outcomes")

    def __init__(self, items: Sequence[T]) -> None:
        self.items = items
        self.outcomes: list[R] | None = None
        self.error: BaseException | None = None
        self.done = threading.Event()  # set once its outcomes or error are in, or once it is to lead
        self.leads = False


def _refused(error: BaseException) -> bool:
    return isinstance(error, StoreFailure)


class GroupCommit(Generic[T, R]):
    """`write(items)` returns one outcome per item, in order; `submit` returns the caller's own. A batch
    whose failure `alone` accepts is written again caller by caller."""

    def __init__(
        self,
        write: Callable[[Sequence[T]], list[R]],
        *,
        max_items: int,
        alone: Callable[[BaseException], bool] = _refused,
    ) -> None:
        self._write = write
        self._max_items = max_items
        self._alone = alone
        self._lock = threading.Lock()
        self._waiting: deque[_Ticket[T, R]] = deque()
        self._leading = False

    def submit(self, items: Sequence[T]) -> list[R]:
        if not items:
            return []
        ticket: _Ticket[T, R] = _Ticket(items)
        with self._lock:
            self._waiting.append(ticket)
            leads = not self._leading
            self._leading = True
        if not leads:
            ticket.done.wait()
        if leads or ticket.leads:
            self._lead(ticket)
        if ticket.error is not None:
            raise ticket.error
        assert ticket.outcomes is not None
        return ticket.outcomes

    def _lead(self, own: _Ticket[T, R]) -> None:
        """Writes batches until the leader's own ticket is answered, then hands the lead on."""
        while own.outcomes is None and own.error is None:
            self._write_batch(self._take())
        with self._lock:
            if not self._waiting:
                self._leading = False
                return
            successor = self._waiting[0]
        successor.leads = True
        successor.done.set()

    def _take(self) -> list[_Ticket[T, R]]:
        """The oldest tickets, at least one, up to `max_items` items in all."""
        batch: list[_Ticket[T, R]] = []
        count = 0
        with self._lock:
            while self._waiting and (not batch or count + len(self._waiting[0].items) <= self._max_items):
                ticket = self._waiting.popleft()
                batch.append(ticket)
                count += len(ticket.items)
        return batch

    def _write_batch(self, batch: list[_Ticket[T, R]]) -> None:
        try:
            outcomes = self._write([item for ticket in batch for item in ticket.items])
        except BaseException as error:
            if len(batch) > 1 and self._alone(error):
                for ticket in batch:
                    self._write_batch([ticket])
            else:
                for ticket in batch:
                    _fail(ticket, error)
            return
        start = 0
        for ticket in batch:
            ticket.outcomes = outcomes[start : start + len(ticket.items)]
            start += len(ticket.items)
            ticket.done.set()


def _fail(ticket: _Ticket[T, R], error: BaseException) -> None:
    ticket.error = error
    ticket.done.set()
