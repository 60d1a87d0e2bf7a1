"""How fast ``mpsd explain``, ``mpsd status`` and ``mpsd env`` start, beside a bare Python.

    python bench/startup.py [--runs 21] [--no-year] [--docs]

Prints, from one run on this machine, the median wall time (and the median CPU time, user +
system, which a busy machine disturbs less) of each command against a bare
``python -c pass``, and their ratios.

The commands run as an installed ``mpsd`` does: the console script's code (``from
mpsd.cli import main``, no runpy) with a bytecode cache, even where PYTHONDONTWRITEBYTECODE
is set (pip compiles an installed package; recompiling mpsd's sources is not start-up).
They share temporary config/state dirs as on a Mac a few minutes after ``mpsd install``:
the config.toml it writes, and a limits.toml and a small history from a few ``mpsd daemon
--once``. ``status`` runs a second time over a year of samples at 30 s (about a million
rows, built with ``bench/footprint.py``'s builder; ``--no-year`` skips it). The runs are
interleaved (every round runs each command once, in a shuffled order) so that every command
sees the same load.

Beside each command, "its imports alone": a ``python -c "import ..."`` of the modules outside
mpsd that the command loads (the standard library's ``dataclasses``, ``pathlib``, ``argparse``,
``tomllib``, ``sqlite3``...), measured the same way. It is the floor of that command's ratio:
what no change to mpsd's own code can take off, only a choice not to use a module.

Then "mpsd own": the command's CPU ratio minus that floor, what mpsd's modules and their work
add. The budget is the product's quality bar, the whole command at most 5x a bare Python,
6x for ``status`` (with a few samples, and over a year of history) (docs/architecture.md); the
two columns beside it say where a command over it spends: in the modules it chose, or in mpsd's
own code. ``--docs`` writes the figures of this run into docs/architecture.md's table, so that
the figures the docs state are the ones measured.
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
BUDGET = 5.0  # the whole command, in bare Pythons: the quality bar (docs/architecture.md)
STATUS_BUDGET = 6.0  # status, with a few samples and over a year of history
# What the `mpsd` console script that pip writes runs.
SCRIPT = "import sys; from mpsd.cli import main; sys.exit(main())"


def base_env(pycache: Path, dirs: Path) -> dict[str, str]:
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "PYTHONPYCACHEPREFIX": str(pycache),
        "NO_COLOR": "1",
        "MPSD_CONFIG_DIR": str(dirs / "config"),
        "MPSD_STATE_DIR": str(dirs / "state"),
        "MPSD_DATA_DIR": str(dirs / "data"),
    }
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def small_history(env: dict[str, str], times: int = 5) -> None:
    """What a Mac has a few minutes after ``mpsd install``: its config.toml, a few samples,
    a limits.toml."""
    from mpsd.config import default_config_text

    config = Path(env["MPSD_CONFIG_DIR"]) / "config.toml"
    if not config.exists():
        config.parent.mkdir(parents=True, exist_ok=True)
        config.write_text(default_config_text())
    for _ in range(times):
        subprocess.run(
            [sys.executable, "-c", SCRIPT, "daemon", "--once"],
            env=env,
            cwd=ROOT,
            capture_output=True,
            check=True,
        )


def year_history(env: dict[str, str]) -> float:
    """A year of samples in ``env``'s state dir (retention set to a year); seconds it took."""
    sys.path.insert(0, str(ROOT / "bench"))
    from footprint import build_history  # the same year as the footprint benchmark

    config = Path(env["MPSD_CONFIG_DIR"])
    config.mkdir(parents=True, exist_ok=True)
    (config / "config.toml").write_text('retention = "366d"\n')  # kept: a year is retained
    started = time.perf_counter()
    build_history(Path(env["MPSD_STATE_DIR"]) / "history.sqlite3", time.time())
    small_history(env, times=1)  # a limits.toml and the daemon's last decision
    return time.perf_counter() - started


# Run as SCRIPT, but print the top-level modules outside mpsd that were imported, at exit.
IMPORTS_PROBE = (
    "import sys, atexit; before = set(sys.modules); "
    "atexit.register(lambda: sys.stderr.write('\\nIMPORTED ' + ' '.join(sorted("
    "m for m in set(sys.modules) - before if '.' not in m and not m.startswith(('mpsd', '__'))"
    ")) + '\\n')); "
    "from mpsd.cli import main; sys.exit(main())"
)


def imports_alone(args: list[str], env: dict[str, str]) -> list[str]:
    """``python -c "import ..."`` of the modules outside mpsd that ``mpsd ARGS`` imports."""
    done = subprocess.run(
        [sys.executable, "-c", IMPORTS_PROBE, *args],
        env=env,
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        check=False,
    )
    line = next(li for li in done.stderr.splitlines() if li.startswith("IMPORTED "))
    modules = line.split()[1:]
    return [sys.executable, "-c", "import " + ", ".join(modules) if modules else "pass"]


def measure(cmd: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall, CPU) seconds of one run; CPU is the child's user + system time."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    # cwd: `python -c` puts the current directory first on sys.path; this checkout's mpsd runs.
    subprocess.run(
        cmd, env=env, cwd=ROOT, stdin=subprocess.DEVNULL, capture_output=True, check=False
    )
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return wall, cpu


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=21, help="rounds (default: 21)")
    parser.add_argument("--no-year", action="store_true", help="skip the year of history")
    parser.add_argument(
        "--docs", action="store_true", help="write the figures into docs/architecture.md"
    )
    args = parser.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="mpsd-bench-startup-"))
    try:
        small = base_env(tmp / "pycache", tmp / "small")
        small_history(small)
        py = sys.executable
        mpsd = [py, "-c", SCRIPT]
        oom = str(ROOT / "examples" / "oom.txt")
        cases: dict[str, tuple[list[str], dict[str, str]]] = {
            "python -c pass": ([py, "-c", "pass"], small),
            "mpsd explain < /dev/null": ([*mpsd, "explain"], small),
            "mpsd explain examples/oom.txt": ([*mpsd, "explain", oom], small),
            "mpsd explain --json examples/oom.txt": ([*mpsd, "explain", "--json", oom], small),
            "mpsd status (5 samples)": ([*mpsd, "status"], small),
            "mpsd status --json (5 samples)": ([*mpsd, "status", "--json"], small),
            "mpsd env": ([*mpsd, "env"], small),
            "mpsd jobs": ([*mpsd, "jobs"], small),
            "mpsd env --shell json": ([*mpsd, "env", "--shell", "json"], small),
        }
        if not args.no_year:
            year = base_env(tmp / "pycache", tmp / "year")
            took = year_history(year)
            print(f"(built a year of history in {took:.0f} s)")
            cases["mpsd status (a year of samples)"] = ([*mpsd, "status"], year)
        floors: dict[str, str] = {}
        for name, (cmd, env) in list(cases.items())[1:]:
            floors[name] = f"{name}: its imports alone"
            cases[floors[name]] = (imports_alone(cmd[3:], env), env)

        for cmd, env in cases.values():  # warm the bytecode and page caches
            measure(cmd, env)
            measure(cmd, env)
        walls: dict[str, list[float]] = {name: [] for name in cases}
        cpus: dict[str, list[float]] = {name: [] for name in cases}
        rng = random.Random(0)
        names = list(cases)
        for _ in range(args.runs):
            rng.shuffle(names)
            for name in names:
                wall, cpu = measure(*cases[name])
                walls[name].append(wall)
                cpus[name].append(cpu)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    with open("/proc/loadavg") as handle:
        load = handle.read().split()[0]
    how = (
        f"python {sys.version.split()[0]} on {sys.platform}, {os.cpu_count()} CPUs, "
        f"load average {load}; medians of {args.runs} interleaved runs"
    )
    print(how)
    table = [
        f"Measured {time.strftime('%Y-%m-%d')} by `python bench/startup.py --runs {args.runs} "
        f"--docs`: {how}, CPU time (user + system):",
        "",
        "| command | CPU ratio | its imports alone | mpsd own | bar |",
        "|---|---|---|---|---|",
    ]
    base_wall = statistics.median(walls["python -c pass"])
    base_cpu = statistics.median(cpus["python -c pass"])
    print(
        f"  {'':<36} {'wall':>8} {'ratio':>6}   {'CPU':>8} {'ratio':>6}   "
        f"{'budget':<11} {'imports alone':>13}   {'mpsd own':>8}"
    )
    for name in cases:
        if name in floors.values():
            continue
        wall, cpu = statistics.median(walls[name]), statistics.median(cpus[name])
        floor = own = verdict = ""
        if name in floors:
            floor_ratio = statistics.median(cpus[floors[name]]) / base_cpu
            floor, own = f"{floor_ratio:5.2f}x", f"{cpu / base_cpu - floor_ratio:+5.2f}x"
            budget = STATUS_BUDGET if name.startswith("mpsd status") else BUDGET
            verdict = f"<= {budget:g}x {'ok' if cpu / base_cpu <= budget else 'OVER'}"
            command, _, detail = name.partition(" (")
            cells = [f"`{command}`" + (f" ({detail}" if detail else "")]
            cells += [f"{cpu / base_cpu:.2f}x", f"{floor_ratio:.2f}x"]
            cells += [f"{cpu / base_cpu - floor_ratio:+.2f}x", verdict.replace("<=", "at most")]
            table.append(f"| {' | '.join(cells)} |")
        print(
            f"  {name:<36} {wall * 1000:6.1f}ms {wall / base_wall:5.2f}x   "
            f"{cpu * 1000:6.1f}ms {cpu / base_cpu:5.2f}x   {verdict:<11} {floor:>13}   {own:>8}"
        )
    if args.docs:
        from tests.generated_docs import Part

        source = "its measurements: run it again, never edit them"
        part = Part(
            ROOT / "docs" / "architecture.md", source, lambda: table, "bench/startup.py --docs"
        )
        part.page.write_text(part.render(part.page.read_text(encoding="utf-8")), encoding="utf-8")
        print(f"wrote the figures into {part.page.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
