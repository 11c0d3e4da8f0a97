"""Reaching the dashboard from outside: Debian's Chromium as the tests and benchmarks/dashboard.py launch it,
and a wait for an HTTP address to answer."""

from __future__ import annotations

import time
import urllib.error
import urllib.request
from pathlib import Path

from playwright.sync_api import ViewportSize

CHROMIUM = Path("/usr/bin/chromium")
# Without the background-networking flags Chromium keeps calling out of this closed network.
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
VIEWPORT: ViewportSize = {"width": 1280, "height": 800}


def wait_http(url: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            if time.monotonic() > deadline:
                raise
        time.sleep(0.1)
