"""Per-prompt cost of mpsd's shell hook beside direnv's, in bash, zsh and fish, in the same run.

Each figure is the time of N calls of the prompt function inside one shell (builtin timing, so
no process start is counted), divided by N, with the cost of an empty loop taken off; the
median of several rounds. Forks per prompt are counted with strace when it is installed.
Contract: < 1 ms per prompt and zero forks; goal: < 100 µs and 40x cheaper than direnv.

A second table times mpsd's hook with large limits.toml files (4000 projects, a file of exactly
the 256 KiB mpsd's hooks accept, a 100 MB one they must ignore), both at a steady prompt and
with a `cd` every prompt (a parse each time). `--hooks DIR` times another copy of the hooks
(e.g. an older checkout's `shell/`), for before/after figures in the same conditions.

With --cpu, the figures are the CPU time (user + system) of the shell running the calls less
that of the same script running none (the empty loop is not taken off): steadier than the clock
when other work shares the machine.

    .venv/bin/python bench/hook.py [--calls N] [--rounds R] [--hooks DIR] [--no-large] [--cpu]
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

LIMITS = """\
high_watermark_ratio = 0.77
low_watermark_ratio = 0.77
limit_bytes = 30954687948
recommended_max_bytes = 40200893440
recommended_max_source = "torch"
baseline_free_bytes = 39192717312
headroom = 0.8
updated_at = 2026-11-30 05:00:00+00:00
projects = [
    "{project}",
    "{other}",
]
baseline_source = "samples"
sample_count = 2016
"""
CPU = False  # --cpu: CPU time instead of the shell's clock (steadier on a loaded machine)
LIMITS_CAP = 256 * 1024  # the largest limits.toml the hooks read (shell/mpsd.*)
# Large files: name -> how many bytes (None: 4000 projects), the project last in the list.
LARGE = {"4000 projects": None, "256 KiB (the cap)": LIMITS_CAP, "100 MB": 100 * 10**6}

# One round: the loop of N calls in the current shell, timed with the shell's own clock, in
# microseconds. `{step}` is what runs each time ("cd" variants move between two directories so
# that the hook has to work out the physical directory and parse the file again).
TIMERS = {
    "bash": """
{setup}
cd {start}
{step}; {step}
_t0=${{EPOCHREALTIME/[.,]/}}
for ((_i = 0; _i < {calls}; _i++)); do {step}; done
_t1=${{EPOCHREALTIME/[.,]/}}
for ((_i = 0; _i < {calls}; _i++)); do :; done
_t2=${{EPOCHREALTIME/[.,]/}}
echo "$(( (_t1 - _t0) - (_t2 - _t1) ))"
""",
    "zsh": """
zmodload zsh/datetime
{setup}
cd {start}
{step}; {step}
float _t0=$EPOCHREALTIME
repeat {calls} {{ {step} }}
float _t1=$EPOCHREALTIME
repeat {calls} {{ : }}
float _t2=$EPOCHREALTIME
printf '%d\\n' $(( ((_t1 - _t0) - (_t2 - _t1)) * 1000000 ))
""",
    # fish has no clock variable: `date` is read outside the timed loops.
    "fish": """
{setup}
cd {start}
{step}; {step}
set -l _r (seq {calls})
set -l _t0 (date +%s%N)
for _i in $_r; {step}; end
set -l _t1 (date +%s%N)
for _i in $_r; true; end
set -l _t2 (date +%s%N)
math --scale=0 "(($_t1 - $_t0) - ($_t2 - $_t1)) / 1000"
""",
}
ARGV = {
    "bash": ["bash", "--norc", "--noprofile", "-c"],
    "zsh": ["zsh", "-f", "-c"],
    "fish": ["fish", "--no-config", "-c"],
}


def cd_step(tmp: Path, hook: str) -> str:
    return f"cd {tmp / 'work' / 'a'}; {hook}; cd {tmp / 'work' / 'proj'}; {hook}"


def hooks(kind: str, tmp: Path, shell_dir: Path) -> dict[str, tuple[str, str]]:
    """name -> (setup code, the prompt step)."""
    ours = f"source {shell_dir / f'mpsd.{kind}'}"
    direnv = f'eval "$(direnv hook {kind})"'
    direnv_step = "_direnv_hook"
    if kind == "fish":
        direnv = "direnv hook fish | source"
        direnv_step = "__direnv_export_eval"
    result = {
        "mpsd, steady": (ours, "_mpsd_hook"),
        "mpsd, cd every prompt": (ours, cd_step(tmp, "_mpsd_hook")),
    }
    if shutil.which("direnv"):
        result["direnv, no .envrc"] = (direnv, direnv_step)
    return result


def environment(tmp: Path, config: str = "config") -> dict[str, str]:
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(tmp / "home"),
        "MPSD_CONFIG_DIR": str(tmp / config),
        "XDG_CONFIG_HOME": str(tmp / "xdg-config"),
        "XDG_DATA_HOME": str(tmp / "xdg-data"),
        # A UTF-8 locale, as on a Mac: bash matches patterns in multibyte mode then.
        "LC_ALL": "C.UTF-8",
    }


def measure(
    kind: str,
    setup: str,
    step: str,
    calls: int,
    tmp: Path,
    config: str = "config",
    timeout: float | None = None,
) -> int:
    """µs spent on ``calls`` steps: by the shell's clock, or with --cpu, the CPU time (user and
    system) of the shell running them less that of the same script running none."""

    def run(count: int) -> tuple[int, float]:
        script = TIMERS[kind].format(
            setup=setup, step=step, calls=count, start=tmp / "work" / "proj"
        )
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        out = subprocess.run(
            [*ARGV[kind], script],
            env=environment(tmp, config),
            capture_output=True,
            text=True,
            check=True,
            timeout=timeout,
        )
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        return int(out.stdout.strip().splitlines()[-1]), cpu

    clock, cpu = run(calls)
    if not CPU:
        return clock
    return max(0, round((cpu - run(0)[1]) * 1e6))


def large_text(size: int | None, project: Path) -> str:
    """limits.toml with thousands of projects (ours last), or padded to ``size`` bytes: with
    project lines up to 256 KiB, with comment lines after the projects beyond (a parse of a
    100 MB projects list would take the old bash hook hours, not the seconds a prompt costs)."""
    head, _, tail = LIMITS.partition("projects = [\n")
    tail = tail.partition("]\n")[2]
    ours = f'    "{project}",\n'
    if size is None:
        lines = [f'    "/Users/me/code/project-{i:05d}",\n' for i in range(4000)]
        return f"{head}projects = [\n{''.join(lines)}{ours}]\n{tail}"
    fixed = len(head) + len("projects = [\n") + len(ours) + len("]\n") + len(tail)
    if size <= 10 * LIMITS_CAP:
        lines, used, i = [], fixed, 0
        while True:
            line = f'    "/Users/me/code/project-{i:06d}",\n'
            if used + len(line) > size:
                break
            lines.append(line)
            used += len(line)
            i += 1
        # The last bytes in a comment line between the header and the projects.
        pad = size - used
        filler = "#" + "x" * (pad - 2) + "\n" if pad >= 2 else "\n" * pad
        return f"{head}{filler}projects = [\n{''.join(lines)}{ours}]\n{tail}"
    comment = "# " + "x" * 97 + "\n"
    count, rest = divmod(size - fixed, len(comment))
    return f"{head}projects = [\n{ours}]\n{tail}{comment * count}{'#' * rest}"


def run_large(args: argparse.Namespace, tmp: Path, shell_dir: Path) -> None:
    """Per-prompt cost with large limits.toml files, steady and with a cd (a parse) each prompt.
    The calls per round are scaled down when one call is slow (the hooks before the cap)."""
    for name, size in LARGE.items():
        config = tmp / f"config-{len(name)}"
        config.mkdir()
        text = large_text(size, tmp / "work" / "proj")
        (config / "limits.toml").write_text(text)
        print(f"  {name}: {len(text.encode())} bytes")
    print(f"{'shell':6} {'limits.toml':20} {'µs/prompt steady':>17} {'µs/prompt cd':>14}")
    for kind in ("bash", "zsh", "fish"):
        if not shutil.which(kind):
            continue
        setup = f"source {shell_dir / f'mpsd.{kind}'}"
        for name in ("normal", *LARGE):
            config = "config" if name == "normal" else f"config-{len(name)}"
            shown = []
            for step in ("_mpsd_hook", cd_step(tmp, "_mpsd_hook")):
                try:
                    shown.append(f"{time_large(kind, setup, step, args, tmp, config):.1f}")
                except subprocess.TimeoutExpired:
                    shown.append(f">{LARGE_TIMEOUT:.0f} s")
            print(f"{kind:6} {name:20} {shown[0]:>17} {shown[1]:>14}")


LARGE_TIMEOUT = 300.0


def time_large(
    kind: str, setup: str, step: str, args: argparse.Namespace, tmp: Path, config: str
) -> float:
    cd = step != "_mpsd_hook"
    # One call first (the script calls the step twice more before timing), to size the rounds.
    probe = measure(kind, setup, step, 1, tmp, config, LARGE_TIMEOUT)
    calls = max(1, min(args.calls, int(200_000 / max(probe, 1))))
    rounds = args.rounds if probe < 1_000_000 else 1
    spent = []
    for _ in range(rounds):
        per = measure(kind, setup, step, calls, tmp, config, LARGE_TIMEOUT) / calls
        if cd:
            idle = step.replace("_mpsd_hook", ":" if kind != "fish" else "true")
            per = (per - measure(kind, "", idle, calls, tmp, config) / calls) / 2
        spent.append(per)
    return statistics.median(spent)


def forks(kind: str, setup: str, step: str, calls: int, tmp: Path) -> float | None:
    """Processes created per prompt (clone/fork/vfork), from strace; None without strace."""
    if not shutil.which("strace"):
        return None
    script = f"{setup}\ncd {tmp / 'work' / 'proj'}\n{step}\n: START\n"
    script += f"{step}\n" * calls
    log = tmp / f"strace-{kind}.log"
    subprocess.run(
        ["strace", "-f", "-qq", "-e", "trace=clone,clone3,fork,vfork", "-o", str(log)]
        + ARGV[kind]
        + [script],
        env=environment(tmp),
        capture_output=True,
        check=True,
    )
    total = sum(1 for line in log.read_text().splitlines() if re.search(r"clone3?\(|fork\(", line))
    # The setup (direnv's `eval "$(...)"`) and the first call fork too: count them apart.
    log.write_text("")
    subprocess.run(
        ["strace", "-f", "-qq", "-e", "trace=clone,clone3,fork,vfork", "-o", str(log)]
        + ARGV[kind]
        + [f"{setup}\ncd {tmp / 'work' / 'proj'}\n{step}\n"],
        env=environment(tmp),
        capture_output=True,
        check=True,
    )
    base = sum(1 for line in log.read_text().splitlines() if re.search(r"clone3?\(|fork\(", line))
    return (total - base) / calls


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000, help="prompts per round (mpsd)")
    parser.add_argument("--direnv-calls", type=int, default=100, help="prompts per round (direnv)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--hooks", type=Path, default=ROOT / "shell", help="directory of the hooks")
    parser.add_argument("--no-large", action="store_true", help="skip the large limits.toml table")
    parser.add_argument(
        "--cpu", action="store_true", help="CPU time, not the clock (for a loaded machine)"
    )
    args = parser.parse_args()
    global CPU
    CPU = args.cpu
    shell_dir = args.hooks.resolve()

    with tempfile.TemporaryDirectory(prefix="mpsd-bench-") as name:
        tmp = Path(name)
        for sub in ("home", "config", "xdg-config", "xdg-data", "work/proj/src", "work/a"):
            (tmp / sub).mkdir(parents=True)
        (tmp / "config" / "limits.toml").write_text(
            LIMITS.format(project=tmp / "work" / "proj", other=tmp / "work" / "other")
        )
        load = os.getloadavg()[0]
        print(f"load average at start: {load:.2f} on {os.cpu_count()} CPUs; hooks: {shell_dir}")
        print("times: " + ("CPU time of the shell" if CPU else "the shell's clock"))
        print(f"{'shell':6} {'hook':24} {'µs/prompt':>10} {'min':>8} {'forks/prompt':>13}")
        summary = []
        for kind in ("bash", "zsh", "fish"):
            if not shutil.which(kind):
                print(f"{kind:6} (not installed)")
                continue
            medians: dict[str, float] = {}
            for label, (setup, step) in hooks(kind, tmp, shell_dir).items():
                calls = args.direnv_calls if label.startswith("direnv") else args.calls
                rounds = []
                for _ in range(args.rounds):
                    spent = measure(kind, setup, step, calls, tmp) / calls
                    if "cd every prompt" in label:
                        # Two prompts per step. The `cd` commands alone (no hook loaded) are
                        # timed in the same round and taken off: what is left is the hook's
                        # share, with zsh's chpwd and fish's PWD runs, as at a real prompt.
                        idle = step.replace("_mpsd_hook", ":" if kind != "fish" else "true")
                        spent -= measure(kind, "", idle, calls, tmp) / calls
                        spent /= 2
                    rounds.append(spent)
                medians[label] = statistics.median(rounds)
                forked = forks(kind, setup, step, min(calls, 50), tmp)
                if forked is not None and "cd every prompt" in label:
                    forked /= 2
                shown = "n/a" if forked is None else f"{forked:.2f}"
                print(f"{kind:6} {label:24} {medians[label]:10.1f} {min(rounds):8.1f} {shown:>13}")
            if "direnv, no .envrc" in medians:
                ratio = medians["direnv, no .envrc"] / medians["mpsd, steady"]
                summary.append(f"{kind}: direnv / mpsd = {ratio:.0f}x")
        print()
        print("; ".join(summary) + "  (goal: 40x)")
        print("contract: < 1000 µs per prompt and 0 forks; goal: < 100 µs")
        if not args.no_large:
            print()
            print("large limits.toml (mpsd's hook only):")
            run_large(args, tmp, shell_dir)
        print(f"load average at end: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
