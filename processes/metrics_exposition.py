"""What `/metrics` serves (the metrics themselves are `core.metrics`), and how the workers of `jobmesh server
--workers N` share theirs.

A worker's metrics are its own, and a scrape of the shared health port reaches one worker, whichever the
kernel picks: so the parent gives its workers a folder (prometheus-client's multiprocess mode, turned on by
`PROMETHEUS_MULTIPROC_DIR` in their environment before they import anything), each writes its values there,
and whichever worker is scraped answers for all of them. A worker that dies has its live gauges removed; its
counts stay (a counter never goes back). Every other process serves its own registry.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from jobmesh.processes.settings import share_metrics_folder, shared_metrics_folder

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def metrics_text() -> bytes:
    """This process's metrics, or all the workers' in multiprocess mode, in the text exposition format."""
    from prometheus_client import REGISTRY, CollectorRegistry, generate_latest
    from prometheus_client.multiprocess import MultiProcessCollector

    from jobmesh.core.metrics import record_build_info

    record_build_info()
    if shared_metrics_folder() is not None:
        registry = CollectorRegistry()
        MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
        return generate_latest(registry)
    return generate_latest(REGISTRY)


class SharedMetrics:
    """The folder the workers of one `jobmesh server` write their metrics to, made empty for them and removed
    when the parent is done. Made before the first worker starts (they inherit the variable)."""

    def __init__(self) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="jobmesh-metrics-"))
        share_metrics_folder(str(self.folder))

    def worker_died(self, pid: int) -> None:
        """Its live gauges (executors connected, lags) no longer count."""
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(pid, str(self.folder))  # type: ignore[no-untyped-call]

    def close(self) -> None:
        if shared_metrics_folder() == str(self.folder):
            share_metrics_folder(None)
        shutil.rmtree(self.folder, ignore_errors=True)
