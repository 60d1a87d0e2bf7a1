"""What the interpreter start-up hook (`_mpsd_startup.pth` + `_mpsd_startup.py`) costs a python.

    python bench/pth_hook.py [--runs 200] [--python PATH]... [--projects 1,100,1000]

For each interpreter (default: the oldest and newest pyenv Pythons from 3.9 on, else this one)
it makes a venv inside a throw-away project opted in by a limits.toml of 1, 100 and 1,000
projects (the project last: the worst place), and times `python -c pass` of that venv,
interleaved in a shuffled order within each round, in four cases:

- without the hook (its .pth moved away; the module's bytecode stays);
- with the hook, started inside the project (it reads limits.toml and sets both variables);
- with the hook in a second venv outside every project, started outside (it reads limits.toml,
  resolves sys.prefix and sets nothing);
- without the hook but with another package's .pth that imports nothing new: what any .pth
  file costs, which the hook pays too;
- without the hook but with the .pth uv and virtualenv put into every venv they make
  (`import _virtualenv`, a module of functions): on 3.11+, whose `python -c pass` loads no
  bytecode at all (its standard library is frozen), the first function loaded from bytecode costs
  about 0.35 ms once, which that .pth, `import torch` and the hook each pay when first;
- with the hook in a venv of the project that has mlx (an empty `mlx` dir: the hook puts its
  finder for `import mlx.core` on sys.meta_path);
- with `--compare FILE`: the hook as FILE has it (an older `startup_hook.py`, e.g. from
  `git show main:mpsd/env/startup_hook.py`), in a venv of the project: before and after in one
  run (issue 32's bar: at most 0.05 ms over it).

Most of the cost is any .pth file's: site.py imports a codec to read one (_bootlocale before
3.10, encodings.utf_8_sig after), which a venv with any other .pth (setuptools', uv's
_virtualenv.pth, an editable install) pays already; then the first import from site-packages.

It prints the median wall time and the median CPU time (user + system of the child, which a busy
machine disturbs less) of each case, the differences against "without" and their ratios, and the
hook's own line of `python -X importtime` (self and cumulative µs, median of the runs).
Contract (issue 11, docs/architecture.md): at most 1 ms of start-up; goal (issue 19): at most
0.3 ms over another package's .pth at each number of projects ("over .pth" column; "over uv"
against uv's .pth, which pays the first bytecode load too).
"""

from __future__ import annotations

import argparse
import glob
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from mpsd.env import pyhooks  # noqa: E402 - after the path above

LIMITS = (
    "high_watermark_ratio = 0.77\nlow_watermark_ratio = 0.7\nlimit_bytes = 30954687948\n"
    'recommended_max_bytes = 40200893440\nrecommended_max_source = "torch"\n'
    "baseline_free_bytes = 39192717312\nheadroom = 0.8\n"
    "updated_at = 2026-11-30 05:00:00+00:00\nprojects = [\n{lines}]\n"
)


def limits_text(project: str, count: int) -> str:
    """limits.toml with ``count`` projects, ``project`` the last of them."""
    others = [f"/Users/someone/code/elsewhere/project-{i:04d}" for i in range(count - 1)]
    return LIMITS.format(lines="".join(f'    "{p}",\n' for p in [*others, project]))


def default_pythons() -> list[str]:
    def version(path: str) -> tuple[int, ...]:
        return tuple(int(x) for x in Path(path).parent.parent.name.split(".")[:2])

    found = sorted(
        (p for p in glob.glob("/root/.pyenv/versions/3.*/bin/python3") if version(p) >= (3, 9)),
        key=version,
    )
    if len(found) >= 2:
        return [found[0], found[-1]]
    return found or [sys.executable]


def timed(python: str, cwd: str, env: dict[str, str]) -> tuple[float, float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run([python, "-c", "pass"], cwd=cwd, env=env, check=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def importtime(python: str, cwd: str, env: dict[str, str]) -> tuple[int, int] | None:
    done = subprocess.run(
        [python, "-X", "importtime", "-c", "pass"],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    for line in done.stderr.splitlines():
        if line.rstrip().endswith(pyhooks.MODULE):
            fields = line.split(":", 1)[1].split("|")
            return int(fields[0]), int(fields[1])
    return None


# The module alone, in-process: unmarshal and run (start() included) of each hook's bytecode as
# site.py would, median of N in a python started in the project; steadier than a whole start on a
# busy machine. argv: config dir, then (label, module file, site dir) triples.
IN_PROCESS = """
import marshal, os, statistics, sys, time, types
os.environ["MPSD_CONFIG_DIR"] = sys.argv[1]
def once(data, site):
    mod = types.ModuleType("_mpsd_startup")
    mod.__file__ = site + "/_mpsd_startup.py"
    sys.modules["_mpsd_startup"], saved = mod, list(sys.meta_path)
    start = time.perf_counter()
    exec(marshal.loads(data), mod.__dict__)
    took = time.perf_counter() - start
    sys.meta_path[:] = saved
    for name in [n for n in os.environ if "WATERMARK" in n or n.startswith("_MPSD")]:
        del os.environ[name]
    return took
cases = [sys.argv[i : i + 3] for i in range(2, len(sys.argv), 3)]
codes = [(label, marshal.dumps(compile(open(f).read(), f, "exec")), site)
         for label, f, site in cases]
times = {label: [] for label, _, _ in codes}
for _ in range(3000):
    for label, data, site in codes:
        times[label].append(once(data, site))
for label, found in times.items():
    print(label, statistics.median(found) * 1e6)
"""


def bench(python: str, runs: int, work: Path, counts: list[int], compare: Path | None) -> None:
    project = work / "project"
    outside = work / "outside"
    project.mkdir()
    outside.mkdir()
    config = work / "config"
    config.mkdir()
    subprocess.run([python, "-m", "venv", "--without-pip", str(project / ".venv")], check=True)
    venv_python = str(project / ".venv" / "bin" / "python")
    limits = config / "limits.toml"
    limits.write_text(limits_text(os.path.realpath(project), max(counts)))
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(work), "MPSD_CONFIG_DIR": str(config)}
    site = pyhooks.inspect_interpreter(venv_python).site

    def check(cwd: Path, wanted: str | None) -> None:
        done = subprocess.run(
            [
                venv_python,
                "-c",
                "import os; print(os.environ.get('PYTORCH_MPS_HIGH_WATERMARK_RATIO'))",
            ],
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        assert done.stdout.strip() == str(wanted) and not done.stderr, (done.stdout, done.stderr)

    pyhooks.write_copy(site)
    check(project, "0.77")
    check(outside, "0.77")  # the environment itself is inside the project
    pyhooks.remove_copy(site)
    check(project, None)
    check(outside, None)

    # "outside" needs an environment outside every project too: a second venv elsewhere.
    other = work / "other-venv"
    subprocess.run([python, "-m", "venv", "--without-pip", str(other)], check=True)
    other_python = str(other / "bin" / "python")
    pyhooks.write_copy(pyhooks.inspect_interpreter(other_python).site)
    pyhooks.write_copy(site)
    pth = Path(site, pyhooks.PTH_FILE)
    off = Path(site, pyhooks.PTH_FILE + ".off")
    # Another package's .pth that imports nothing new (the cost any .pth file has).
    other_pth = Path(site, "another-package.pth.off")
    other_pth.write_text("import sys\n")
    other_on = Path(site, "another-package.pth")
    # The .pth uv and virtualenv put into every venv they make: `import _virtualenv`, a module
    # of a few functions. It pays what the first function a python loads from bytecode costs
    # (about 0.35 ms on 3.13, where the standard library of `python -c pass` is all frozen).
    Path(site, "_uv_like.py").write_text(
        "def patch(a):\n    return a\n\n\ndef unpatch(a):\n    return a\n"
    )
    uv_pth = Path(site, "_uv_like.pth.off")
    uv_pth.write_text("import _uv_like\n")
    uv_on = Path(site, "_uv_like.pth")
    # name: (python, cwd, hook on, other .pth on); "without" only moves the .pth away (the
    # module's bytecode stays: no case pays for compiling it).
    cases = {
        "without the hook": (venv_python, project, False, False),
        "another .pth, no hook": (venv_python, project, False, True),
        "uv's _virtualenv.pth, no hook": (venv_python, project, False, "uv"),
        "hook, inside the project": (venv_python, project, True, False),
        "hook, outside (other venv)": (other_python, outside, True, False),
    }

    def project_venv(name: str, module: bytes | None = None) -> str:
        """Another venv of the project with the hook: mlx in it (name "mlx"), or ``module``."""
        subprocess.run([python, "-m", "venv", "--without-pip", str(project / name)], check=True)
        python_ = str(project / name / "bin" / "python")
        site_ = pyhooks.inspect_interpreter(python_).site
        pyhooks.write_copy(site_)
        if module is None:
            Path(site_, "mlx").mkdir()
        else:
            Path(site_, pyhooks.MODULE_FILE).write_bytes(module)
        return python_

    cases["hook, mlx in the environment"] = (project_venv("mlx"), project, True, False)
    if compare is not None:
        older = project_venv("older", compare.read_bytes())
        cases["hook before (--compare)"] = (older, project, True, False)

    def toggle(on: bool, on_path: Path, off_path: Path) -> None:
        if on and off_path.exists():
            off_path.rename(on_path)
        elif not on and on_path.exists():
            on_path.rename(off_path)

    def run(name: str) -> tuple[float, float]:
        python_, cwd, hook, other_file = cases[name]  # other_file: True, "uv" or False
        if python_ == venv_python:
            toggle(hook, pth, off)
            toggle(other_file is True, other_on, other_pth)
            toggle(other_file == "uv", uv_on, uv_pth)
        return timed(python_, str(cwd), env)

    version = subprocess.run(
        [python, "-c", "import sys; print(sys.version.split()[0])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    for count in counts:
        limits.write_text(limits_text(os.path.realpath(project), count))
        toggle(True, pth, off)
        check(project, "0.77")
        walls: dict[str, list[float]] = {name: [] for name in cases}
        cpus: dict[str, list[float]] = {name: [] for name in cases}
        for name in cases:  # warm-up: bytecode written, caches filled
            run(name)
        for _ in range(runs):
            order = list(cases)
            random.shuffle(order)
            for name in order:
                wall, cpu = run(name)
                walls[name].append(wall)
                cpus[name].append(cpu)
        toggle(True, pth, off)
        toggle(False, other_on, other_pth)
        toggle(False, uv_on, uv_pth)
        # The hook's own line of -X importtime in each venv of the project that has it,
        # interleaved: the module's read, unmarshal and run, apart from the rest of start-up.
        timed_here = [n for n in cases if n.startswith("hook") and cases[n][1] == project]
        selfs: dict[str, list[tuple[int, int]]] = {name: [] for name in timed_here}
        for _ in range(max(21, runs // 10)):
            for name in timed_here:
                got = importtime(cases[name][0], str(project), env)
                if got is not None:
                    selfs[name].append(got)
        size = limits.stat().st_size
        print(
            f"\nPython {version} ({python}), {count} projects ({size / 1024:.0f} KiB "
            f"limits.toml), {runs} runs of `python -c pass` per case, interleaved"
        )
        print(
            f"{'case':<31}{'wall ms':>9}{'+ms':>8}{'cpu ms':>9}{'+ms':>8}"
            f"{'over .pth':>11}{'(cpu)':>8}{'over uv':>9}{'(cpu)':>8}"
        )
        base_wall, base_cpu = (statistics.median(t["without the hook"]) for t in (walls, cpus))
        pth_wall, pth_cpu = (statistics.median(t["another .pth, no hook"]) for t in (walls, cpus))
        uv_wall, uv_cpu = (
            statistics.median(t["uv's _virtualenv.pth, no hook"]) for t in (walls, cpus)
        )
        for name in cases:
            wall, cpu = statistics.median(walls[name]), statistics.median(cpus[name])
            over = f"{(wall - pth_wall) * 1e3:>+11.2f}{(cpu - pth_cpu) * 1e3:>+8.2f}"
            over += f"{(wall - uv_wall) * 1e3:>+9.2f}{(cpu - uv_cpu) * 1e3:>+8.2f}"
            print(
                f"{name:<31}{wall * 1e3:>9.2f}{(wall - base_wall) * 1e3:>+8.2f}"
                f"{cpu * 1e3:>9.2f}{(cpu - base_cpu) * 1e3:>+8.2f}"
                f"{over if name.startswith('hook') else '':}"
            )
        before = "hook before (--compare)"
        if compare is not None:
            here = str(ROOT / "mpsd" / "env" / "startup_hook.py")
            mlx_site = pyhooks.inspect_interpreter(cases["hook, mlx in the environment"][0]).site
            args = [str(config), "before", str(compare), site, "now", here, site]
            args += ["now,mlx", here, mlx_site]
            done = subprocess.run(
                [python, "-c", IN_PROCESS, *args],
                cwd=project,
                capture_output=True,
                text=True,
                check=True,
            )
            us = {k: float(v) for k, v in (line.split() for line in done.stdout.splitlines())}
            print(
                f"in-process (unmarshal + run, median of 3000): the hook before {us['before']:.1f}"
                f" µs, now {us['now']:.1f} µs ({us['now'] - us['before']:+.1f}), with mlx "
                f"{us['now,mlx']:.1f} µs ({us['now,mlx'] - us['before']:+.1f}); bar: +50 µs"
            )
        for name in timed_here:
            found = selfs[name]
            if not found:
                print(f"-X importtime did not list {pyhooks.MODULE} ({name}): the hook did not run")
                continue
            self_us = statistics.median(t[0] for t in found)
            line = f"-X importtime, {pyhooks.MODULE} ({name}): self {self_us:.0f} µs"
            if before in cases and name != before and selfs[before]:
                over = self_us - statistics.median(t[0] for t in selfs[before])
                wall, cpu = (statistics.median(t[name]) for t in (walls, cpus))
                old_wall, old_cpu = (statistics.median(t[before]) for t in (walls, cpus))
                line += (
                    f", {over:+.0f} µs over the hook before (wall {(wall - old_wall) * 1e3:+.3f}"
                    f" ms, cpu {(cpu - old_cpu) * 1e3:+.3f} ms; bar: +0.05 ms)"
                )
            print(f"{line} (median of {len(found)})")


def default_counts(text: str) -> list[int]:
    return [int(part) for part in text.split(",") if part.strip()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--python", action="append", default=[])
    parser.add_argument("--projects", type=default_counts, default=[1, 100, 1000])
    parser.add_argument("--compare", type=Path, metavar="FILE", help="an older startup_hook.py")
    args = parser.parse_args()
    for python in args.python or default_pythons():
        with tempfile.TemporaryDirectory(prefix="mpsd-pth-bench-") as tmp:
            bench(python, args.runs, Path(tmp), args.projects, args.compare)


if __name__ == "__main__":
    main()
