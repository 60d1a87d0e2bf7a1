"""How long `mpsd install`, a second `mpsd install`, `--dry-run`, `mpsd doctor` and
`mpsd uninstall` take for a user, in a throw-away HOME (no launchd: this measures the file
work, the first sample and the summary), beside a bare `python -c pass`.

Run: .venv/bin/python bench/install.py [runs]
Not a test: it prints figures. Goal: a re-run of install (nothing to do) well under a second.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _env(base: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MPSD_", "XDG_"))}
    env.update(
        HOME=str(base / "home"),
        MPSD_CONFIG_DIR=str(base / "config"),
        MPSD_STATE_DIR=str(base / "state"),
        MPSD_DATA_DIR=str(base / "data"),
        PYTHONPATH=str(ROOT),
        # no launchctl on PATH: the Linux path (a Mac's launchctl is not benchmarked here)
        PATH=os.pathsep.join(
            d
            for d in os.environ.get("PATH", "").split(os.pathsep)
            if d and not (Path(d) / "launchctl").exists()
        ),
    )
    return env


def _time(argv: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    done = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - start
    if done.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(argv)} failed: {done.stderr.strip()}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="?", type=int, default=5, help="runs (default: 5)")
    runs = parser.parse_args().runs
    mpsd = [sys.executable, "-m", "mpsd"]
    steps = {
        "python -c pass": [sys.executable, "-c", "pass"],
        "install (first)": [*mpsd, "install"],
        "install (again)": [*mpsd, "install"],
        "install --dry-run": [*mpsd, "install", "--dry-run"],
        "doctor": [*mpsd, "doctor"],
        "uninstall": [*mpsd, "uninstall", "--purge"],
    }
    times: dict[str, list[float]] = {name: [] for name in steps}
    for _ in range(runs):
        with tempfile.TemporaryDirectory() as tmp:
            base = Path(tmp)
            (base / "home").mkdir()
            (base / "home" / ".bashrc").write_text("export A=1\n")
            env = _env(base)
            for name, argv in steps.items():
                times[name].append(_time(argv, env))
    bare = statistics.median(times["python -c pass"])
    print(f"median of {runs} runs, wall clock, throw-away HOME, no launchd")
    print(f"{'step':<20} {'median':>9} {'x bare python':>14}")
    for name, values in times.items():
        median = statistics.median(values)
        print(f"{name:<20} {median * 1000:>7.0f}ms {median / bare:>13.1f}x")


if __name__ == "__main__":
    main()
