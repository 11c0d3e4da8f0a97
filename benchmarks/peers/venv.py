"""The peers' virtual environment: `.jobmesh/peers-venv`, made from `requirements.lock` beside this file.

    .venv/bin/python -m benchmarks.peers.venv            # make or refresh it (what the benchmark calls)
    .venv/bin/python -m benchmarks.peers.venv --relock   # after editing requirements.in: write the lock anew

The venv is made anew whenever the lock changes: its stamp file holds the lock's SHA-256, so a venv that
matches is used as it is, and nothing is left installed that the lock no longer names. A file lock keeps two
runs (a benchmark and the smoke test) from building it at once. Standard library only.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
LOCK = HERE / "requirements.lock"
REQUIREMENTS = HERE / "requirements.in"
VENV = REPO / ".jobmesh" / "peers-venv"
STAMP_NAME = ".lock-sha256"
LOCK_HEADER = (
    "# The peers' exact versions, every package included: `pip freeze` of a venv made from requirements.in\n"
    "# (`.venv/bin/python -m benchmarks.peers.venv --relock`), installed with --no-deps into\n"
    "# .jobmesh/peers-venv.\n"
)


def lock_digest(lock: Path = LOCK) -> str:
    return hashlib.sha256(lock.read_bytes()).hexdigest()


def venv_python(venv: Path = VENV) -> Path:
    return venv / "bin" / "python"


def is_current(venv: Path, digest: str) -> bool:
    stamp = venv / STAMP_NAME
    return venv_python(venv).exists() and stamp.exists() and stamp.read_text().strip() == digest


@contextlib.contextmanager
def _exclusive(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def _pip(venv: Path, *args: str) -> None:
    quiet = ("--quiet", "--disable-pip-version-check", "--no-input")
    subprocess.run([str(venv_python(venv)), "-m", "pip", *args, *quiet], check=True, timeout=900)


def _create(venv: Path) -> None:
    shutil.rmtree(venv, ignore_errors=True)
    # run from the project's venv, this makes a venv of its base interpreter, not a child of the project's
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)


def ensure(venv: Path = VENV, lock: Path = LOCK) -> Path:
    """The peers venv's python, installed from the lock unless the venv already matches it."""
    digest = lock_digest(lock)
    if is_current(venv, digest):
        return venv_python(venv)
    with _exclusive(venv.with_name(venv.name + ".lock")):
        if is_current(venv, digest):  # built by another run while this one waited
            return venv_python(venv)
        print(f"installing the peers from {lock.relative_to(REPO)} into {venv}", flush=True)
        _create(venv)
        # the lock names every package: --no-deps installs exactly those, and pip check proves it is whole
        _pip(venv, "install", "--no-deps", "--require-virtualenv", "-r", str(lock))
        _pip(venv, "check")
        (venv / STAMP_NAME).write_text(digest + "\n")
    return venv_python(venv)


def relock(requirements: Path = REQUIREMENTS, lock: Path = LOCK) -> None:
    """Resolves requirements.in in a throwaway venv and writes its `pip freeze` as the lock."""
    with tempfile.TemporaryDirectory(prefix="peers-relock-") as scratch:
        venv = Path(scratch) / "venv"
        _create(venv)
        _pip(venv, "install", "--require-virtualenv", "-r", str(requirements))
        frozen = subprocess.run(
            [str(venv_python(venv)), "-m", "pip", "freeze", "--disable-pip-version-check"],
            check=True,
            capture_output=True,
            text=True,
            timeout=120,
        ).stdout
    lock.write_text(LOCK_HEADER + frozen)
    print(f"wrote {lock.relative_to(REPO)}")


def installed_versions(lock: Path = LOCK) -> dict[str, str]:
    """Package -> version, as the lock pins them."""
    versions = {}
    for line in lock.read_text().splitlines():
        name, separator, version = line.partition("==")
        if separator and not line.startswith("#"):
            versions[name.strip().lower()] = version.strip()
    return versions


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="benchmarks.peers.venv", description=__doc__.split("\n\n")[0])
    parser.add_argument("--relock", action="store_true", help="write requirements.lock from requirements.in")
    args = parser.parse_args(argv)
    if args.relock:
        relock()
    print(ensure())
    return 0


if __name__ == "__main__":
    sys.exit(main())
