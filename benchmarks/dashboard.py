"""The dashboard's board under a steady stream of runs: frame times in a real browser.

    .venv/bin/python -m benchmarks.dashboard [--rate 1000] [--duration 120] [--warmup 10]

Starts `jobmesh dev` with its Envoy on free ports (a throwaway SQLite store), opens the board in Debian's
Chromium (headless, driven by Playwright, 1280 by 800), and offers `--rate` immediate jobs a minute for
`--duration` seconds, paced by the wall clock (`BatchCreateJobs` once a second). Jobs are `handler` targets
(`benchmarks.handlers:HANDLERS`), so each run goes SCHEDULED → QUEUED → RUNNING → SUCCEEDED on the board
within a moment: about four changes a run.

What it measures, inside the page, with the Performance API: the time between consecutive animation frames
(`requestAnimationFrame`; 16.7 ms when the page keeps up at 60 Hz), and the long tasks (over 50 ms) the main
thread ran. It prints the frame-time p50/p95/p99/max over the measured window, the long tasks, the runs the
board counted, and what was offered, and writes every frame time and long task to a results file
(`benchmarks/results_file.py`). Nothing is asserted: it is a measurement, not a test.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
from playwright.sync_api import sync_playwright

from benchmarks import results_file
from benchmarks.figures import percentile
from jobmesh.v1 import job_pb2, job_service_pb2, job_service_pb2_grpc
from tests.acceptance.processes import free_port
from tests.web.browser import CHROMIUM, CHROMIUM_FLAGS, VIEWPORT, wait_http

REPO = Path(__file__).resolve().parents[1]
# Collects every frame interval and long task from the moment it runs.
PROBE = """
window.__frames = [];
window.__longTasks = [];
let last = performance.now();
const tick = (now) => { window.__frames.push(now - last); last = now; requestAnimationFrame(tick); };
requestAnimationFrame(tick);
new PerformanceObserver((list) => {
  for (const entry of list.getEntries()) window.__longTasks.push(entry.duration);
}).observe({ type: "longtask", buffered: false });
"""


def start_mesh(folder: Path, address: str, web: str) -> subprocess.Popen[bytes]:
    command = [
        str(Path(sys.executable).parent / "jobmesh"),
        "dev",
        "--listen",
        address,
        "--dashboard-listen",
        web,
        "--database-url",
        f"sqlite:///{folder / 'dev.db'}",
        "--handlers",
        "benchmarks.handlers:HANDLERS",
        "--concurrency",
        "64",
    ]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    log = (folder / "jobmesh.log").open("wb")
    return subprocess.Popen(
        command, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )


@dataclass
class Offered:
    """What the load has sent so far, and how many of its batches the server refused."""

    jobs: int = 0
    refused_batches: int = 0


def offer(address: str, per_minute: int, seconds: float, stop: threading.Event, offered: Offered) -> None:
    """Immediate jobs at `per_minute`, one batch a second, paced by the wall clock. A batch the server refuses
    (RESOURCE_EXHAUSTED: a busy machine) is counted and its jobs go with the next one."""
    target = job_pb2.Target(handler=job_pb2.Target.Handler(name="bench.stamp"))
    tag = uuid.uuid4().hex[:6]
    with grpc.insecure_channel(address) as channel:
        stub = job_service_pb2_grpc.JobServiceStub(channel)
        start = time.monotonic()
        while not stop.is_set() and (elapsed := time.monotonic() - start) < seconds:
            due = int(per_minute * min(elapsed + 1, seconds) / 60) - offered.jobs
            requests = []
            for i in range(max(due, 0)):
                job = job_pb2.Job(target=target, labels={"bench": tag})
                job.schedule.immediate.SetInParent()
                job_id = f"b{tag}-{offered.jobs + i}"
                requests.append(job_service_pb2.CreateJobRequest(job=job, job_id=job_id))
            if requests:
                batch = job_service_pb2.BatchCreateJobsRequest(requests=requests)
                try:
                    stub.BatchCreateJobs(batch, timeout=30)
                    offered.jobs += len(requests)
                except grpc.RpcError as error:
                    if error.code() != grpc.StatusCode.RESOURCE_EXHAUSTED:
                        raise
                    offered.refused_batches += 1
            stop.wait(max(0.0, start + elapsed + 1 - time.monotonic()))


def measure(url: str, address: str, args: argparse.Namespace) -> dict[str, Any]:
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_FLAGS)
        page = browser.new_page(viewport=VIEWPORT)
        page.goto(url)
        page.get_by_role("status").filter(has_text="live").wait_for()
        stop, offered = threading.Event(), Offered()
        sender = threading.Thread(
            target=offer, args=(address, args.rate, args.warmup + args.duration, stop, offered)
        )
        sender.start()
        time.sleep(args.warmup)
        page.evaluate(PROBE)
        time.sleep(args.duration)
        frames: list[float] = page.evaluate("window.__frames")
        long_tasks: list[float] = page.evaluate("window.__longTasks")
        counted = page.locator('[data-count="SUCCEEDED"]').inner_text()
        stop.set()
        sender.join()
        browser.close()
    return {
        "frames": frames,
        "long_tasks": long_tasks,
        "succeeded_on_board": counted,
        "offered": offered.jobs,
        "refused_batches": offered.refused_batches,
    }


def report(result: dict[str, Any], args: argparse.Namespace) -> str:
    frames = sorted(result["frames"][1:])  # the first interval starts before the probe
    tasks = result["long_tasks"]
    ms = {name: percentile(frames, q) for name, q in (("p50", 0.5), ("p95", 0.95), ("p99", 0.99))}
    lines = [
        f"board under {args.rate} runs/min for {args.duration:.0f} s (after {args.warmup:.0f} s of warm-up)",
        f"  offered jobs: {result['offered']} ({result['refused_batches']} batches refused and sent later);"
        f" SUCCEEDED on the board: {result['succeeded_on_board']}",
        f"  frames: {len(frames)} ({len(frames) / args.duration:.1f}/s)",
        "  frame time ms: p50 {p50:.1f}  p95 {p95:.1f}  p99 {p99:.1f}".format(**ms)
        + f"  max {max(frames):.1f}",
        f"  frames over 50 ms: {sum(1 for f in frames if f > 50)}",
        f"  long tasks (>50 ms): {len(tasks)}, longest {max(tasks, default=0):.0f} ms",
    ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    recording = results_file.start("benchmarks.dashboard", argv)
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rate", type=int, default=1000, help="runs offered a minute (default 1000)")
    parser.add_argument("--duration", type=float, default=120, help="measured seconds (default 120)")
    parser.add_argument(
        "--warmup", type=float, default=10, help="seconds of load before measuring (default 10)"
    )
    results_file.add_option(parser)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="jobmesh-dashboard-bench-") as tmp:
        folder = Path(tmp)
        address, web = f"127.0.0.1:{free_port()}", f"127.0.0.1:{free_port()}"
        mesh = start_mesh(folder, address, web)
        try:
            wait_http(f"http://{web}/")
            result = measure(f"http://{web}/", address, args)
        finally:
            os.killpg(mesh.pid, signal.SIGINT)
            try:
                mesh.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(mesh.pid, signal.SIGKILL)
                mesh.wait()
    print(report(result, args))
    recording.save(result, args.json)


if __name__ == "__main__":
    main()
