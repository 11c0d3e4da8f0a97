"""The server's immediate bypass: runs due soon go to the queue off the request path, in batches."""

from __future__ import annotations

import logging
import queue as queue_module
import threading
from collections.abc import Sequence

from jobmesh.core.attempts import Dispatchable
from jobmesh.core.dispatch import Dispatcher
from jobmesh.core.errors import JobmeshError
from jobmesh.core.outage_log import OutageLog
from jobmesh.core.ports.queue import QueueUnavailable

log = logging.getLogger(__name__)


class BackgroundDispatcher:
    """The server's immediate bypass, off the request path: creates return once the database has the runs,
    and one thread publishes whatever accumulated meanwhile in one batch (a group commit for the queue).

    A batch the queue refuses is dropped: its runs are SCHEDULED in the database and the watcher sends them.
    """

    def __init__(self, dispatcher: Dispatcher, max_batch: int = 5000) -> None:
        self._dispatcher = dispatcher
        self._max_batch = max_batch
        self._pending: queue_module.SimpleQueue[Dispatchable | None] = queue_module.SimpleQueue()
        self._dispatching = OutageLog(log, "immediate dispatch")
        self._thread = threading.Thread(target=self._run, name="jobmesh-dispatch", daemon=True)
        self._thread.start()

    def dispatch(self, items: Sequence[Dispatchable]) -> bool:
        for item in items:
            self._pending.put(item)
        return True

    def close(self, timeout: float = 10.0) -> None:
        self._pending.put(None)
        self._thread.join(timeout)

    def _run(self) -> None:
        while True:
            first = self._pending.get()
            if first is None:
                return
            batch = [first]
            stop = False
            while len(batch) < self._max_batch:
                try:
                    item = self._pending.get_nowait()
                except queue_module.Empty:
                    break
                if item is None:
                    stop = True
                    break
                batch.append(item)
            try:
                self._dispatcher.dispatch(batch)
            except (JobmeshError, QueueUnavailable) as error:  # a dependency away: the watcher sends them
                self._dispatching.failed(f"{len(batch)} runs left to the watcher: {error}")
            except Exception:  # the watcher covers these runs; the thread must live on
                log.exception("immediate dispatch of %d runs failed; the watcher will send them", len(batch))
            else:
                self._dispatching.succeeded()
            if stop:
                return
