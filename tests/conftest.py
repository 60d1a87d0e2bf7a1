"""Shared fixtures. Every test runs with temporary mpsd dirs and a temporary HOME:
no test ever reads or writes the real user's files. Nor does an activated venv reach a test:
its ``bin/`` (an ``mpsd``, a ``python3``) is taken off PATH and ``VIRTUAL_ENV`` is unset, so the
suite sees the same environment whether or not the caller ran ``source .venv/bin/activate``."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# This environment's console script, normalised as mpsd writes it: `sys.executable` may be spelt
# with `..` in it (a python started as `../.venv/bin/python`), and no test depends on that.
THIS_MPSD = os.path.join(os.path.dirname(os.path.normpath(sys.executable)), "mpsd")

# Subprocesses (`python -m mpsd`, shells calling mpsd) import this checkout's mpsd.
os.environ["PYTHONPATH"] = os.pathsep.join(
    p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p
)


@pytest.fixture(autouse=True)
def isolated_dirs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Path]]:
    home = tmp_path / "home"
    dirs = {
        "home": home,
        "config": tmp_path / "config",
        "state": tmp_path / "state",
        "data": tmp_path / "data",
    }
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("MPSD_CONFIG_DIR", str(dirs["config"]))
    monkeypatch.setenv("MPSD_STATE_DIR", str(dirs["state"]))
    monkeypatch.setenv("MPSD_DATA_DIR", str(dirs["data"]))
    for name in (
        "XDG_CONFIG_HOME",
        "XDG_STATE_HOME",
        "XDG_DATA_HOME",
        "MPSD_DEBUG",
        "NO_COLOR",
        "PYTORCH_MPS_HIGH_WATERMARK_RATIO",
        "PYTORCH_MPS_LOW_WATERMARK_RATIO",
        "_MPSD_EXPORTED_HIGH",
        "_MPSD_EXPORTED_LOW",
        "VIRTUAL_ENV",  # an activated venv would be "the project's python" (doctor, probe)
        "VIRTUAL_ENV_PROMPT",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PATH", _path_without_venvs(os.environ.get("PATH", "")))
    yield dirs


def wait_for(predicate: Callable[[], object], what: str = "the condition") -> object:
    """Poll ``predicate`` until it is true and return its value. The limit (POLL_LIMIT) is no
    timing: it only ends a wait that would never end, however busy the machine."""
    deadline = time.monotonic() + POLL_LIMIT
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what} after {POLL_LIMIT:g} s")
        time.sleep(0.05)


POLL_LIMIT = 300.0


def _path_without_venvs(path: str) -> str:
    """``path`` less the ``bin/`` of every virtual environment (a dir beside a pyvenv.cfg)."""
    kept = [d for d in path.split(os.pathsep) if d and not (Path(d).parent / "pyvenv.cfg").exists()]
    return os.pathsep.join(kept)


def run_mpsd(
    *args: str,
    input: str | bytes | None = None,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
    timeout: float = 60,
) -> subprocess.CompletedProcess[str]:
    """Run ``python -m mpsd ARGS`` as a user would, capturing text output."""
    full_env = dict(os.environ)
    if env:
        full_env.update(env)
    data = input.decode("utf-8", "replace") if isinstance(input, bytes) else input
    return subprocess.run(
        [sys.executable, "-m", "mpsd", *args],
        input=data,
        capture_output=True,
        text=True,
        env=full_env,
        cwd=cwd,
        timeout=timeout,
        check=False,
    )


# -- the suite leaves nothing in the checkout ------------------------------------------
def _checkout_status() -> set[str] | None:
    """``git status --porcelain`` of the checkout (untracked files one by one), or None
    where there is no git or no repository."""
    try:
        done = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=all"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return set(done.stdout.splitlines()) if done.returncode == 0 else None


_STATUS_BEFORE: set[str] | None = None


def pytest_sessionstart(session: pytest.Session) -> None:
    global _STATUS_BEFORE
    _STATUS_BEFORE = _checkout_status()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """A test that writes into the checkout (not tmp_path) fails the session, naming what
    it left."""
    if _STATUS_BEFORE is None:
        return
    after = _checkout_status()
    left = sorted((after or set()) - _STATUS_BEFORE)
    if left:
        session.exitstatus = 1
        sys.stderr.write(
            "\nThe tests left these in the checkout (write to tmp_path instead):\n"
            + "".join(f"  {line}\n" for line in left)
        )


@pytest.fixture(autouse=True)
def mpsd_logger_as_it_was() -> Iterator[None]:
    """A daemon set up in one test (its log file, no propagation) must not hide the next
    test's log records from caplog."""
    import logging

    logger = logging.getLogger("mpsd")
    handlers, propagate, level = list(logger.handlers), logger.propagate, logger.level
    yield
    for handler in logger.handlers[:]:
        if handler not in handlers:
            logger.removeHandler(handler)
            handler.close()
    logger.propagate, logger.level = propagate, level
