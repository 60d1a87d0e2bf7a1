"""What the start-up hook's MLX finder costs `import torch` (every import passes it).

    python bench/mlx_import.py [--runs 20]

In an opted-in project it makes a venv of this python (torch reached through a path .pth to this
python's site-packages, mlx present as an empty `mlx` dir, so the hook puts its finder first on
sys.meta_path) and times `python -c "import torch"` with and without the hook, interleaved:
median wall and CPU time (user + system of the child). A noisy machine moves those by more than
the finder costs, so it also counts the imports that pass the finder during `import torch` and
times the finder's answer to one of them: their product is the finder's own cost.
Bar (issue 32): `import torch` at most 1% slower with the hook.
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import timeit
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.pth_hook import limits_text  # noqa: E402 - after the path above
from mpsd.env import pyhooks, startup_hook  # noqa: E402

COUNT = (
    "import sys\n"
    "class Count:\n"
    "    n = 0\n"
    "    @classmethod\n"
    "    def find_spec(cls, *a):\n"
    "        cls.n += 1\n"
    "sys.meta_path.insert(0, Count)\n"
    "import torch\n"
    "print(Count.n, any(getattr(f, '__name__', '') == '_mpsd_startup' for f in sys.meta_path))"
)


def timed(python: str, cwd: Path, env: dict[str, str]) -> tuple[float, float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(
        [python, "-c", "import torch"], cwd=cwd, env=env, check=True, stderr=subprocess.DEVNULL
    )
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    torch_site = next(
        (p for p in sys.path if p.endswith("site-packages") and Path(p, "torch").is_dir()), None
    )
    if torch_site is None:
        sys.exit("torch is not installed for this python")
    with tempfile.TemporaryDirectory(prefix="mpsd-mlx-bench-") as tmp:
        work = Path(os.path.realpath(tmp))
        project, config = work / "project", work / "config"
        project.mkdir()
        config.mkdir()
        (config / "limits.toml").write_text(limits_text(str(project), 1) + "mlx_limit = true\n")
        base = getattr(sys, "_base_executable", sys.executable)
        subprocess.run([base, "-m", "venv", "--without-pip", str(project / ".venv")], check=True)
        python = str(project / ".venv" / "bin" / "python")
        site = pyhooks.inspect_interpreter(python).site
        Path(site, "torch-here.pth").write_text(torch_site + "\n")
        Path(site, "mlx").mkdir()
        pyhooks.write_copy(site, python)
        env = {
            "PATH": os.environ.get("PATH", ""),
            "HOME": str(work),
            "MPSD_CONFIG_DIR": str(config),
        }
        pth, off = Path(site, pyhooks.PTH_FILE), Path(site, pyhooks.PTH_FILE + ".off")
        out = subprocess.run([python, "-c", COUNT], cwd=project, env=env, capture_output=True)
        passing, installed = out.stdout.decode().split()
        assert installed == "True", "the hook did not put its finder on sys.meta_path"
        cases: dict[str, tuple[list[float], list[float]]] = {"without": ([], []), "with": ([], [])}

        def switch(name: str) -> None:
            if name == "with" and off.exists():
                off.rename(pth)
            elif name == "without" and pth.exists():
                pth.rename(off)

        for name in [*cases, *cases]:  # warm-up
            switch(name)
            timed(python, project, env)
        for _ in range(args.runs):
            order = list(cases)
            random.shuffle(order)
            for name in order:
                switch(name)
                wall, cpu = timed(python, project, env)
                cases[name][0].append(wall)
                cases[name][1].append(cpu)
    find = startup_hook.find_spec
    per_call = min(timeit.repeat(lambda: find("torch.nn.modules", None, None), number=10000)) / 1e4
    print(f"`import torch` ({args.runs} runs each, interleaved), Python {sys.version.split()[0]}")
    (wall0, cpu0), (wall1, cpu1) = (
        (statistics.median(walls), statistics.median(cpus)) for walls, cpus in cases.values()
    )
    print(f"without the hook: wall {wall0 * 1e3:.1f} ms, cpu {cpu0 * 1e3:.1f} ms")
    print(
        f"with the hook (finder on): wall {wall1 * 1e3:.1f} ms ({(wall1 / wall0 - 1):+.2%}), "
        f"cpu {cpu1 * 1e3:.1f} ms ({(cpu1 / cpu0 - 1):+.2%})"
    )
    own = int(passing) * per_call
    print(
        f"the finder's own cost: {passing} imports pass it x {per_call * 1e9:.0f} ns = "
        f"{own * 1e3:.3f} ms, {own / cpu0 * 100:.3f}% of import torch's cpu (bar: 1%)"
    )


if __name__ == "__main__":
    main()
