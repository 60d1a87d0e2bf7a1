"""Per-prompt cost of mpsd's shell hook beside direnv's, in bash, zsh and fish, in the same run.

Each figure is the time of N calls of the prompt function inside one shell (builtin timing, so
no process start is counted), divided by N, with the cost of an empty loop taken off; the
median of several rounds. Forks per prompt are counted with strace when it is installed.
Contract: < 1 ms per prompt and zero forks; goal: < 100 µs and 40x cheaper than direnv.

    .venv/bin/python bench/hook.py [--calls N] [--rounds R]
"""

from __future__ import annotations

import argparse
import os
import re
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


def hooks(kind: str, tmp: Path) -> dict[str, tuple[str, str]]:
    """name -> (setup code, the prompt step)."""
    cd_step = f"cd {tmp / 'work' / 'a'}; {{hook}}; cd {tmp / 'work' / 'proj'}; {{hook}}"
    ours = f"source {ROOT / 'shell' / f'mpsd.{kind}'}"
    direnv = f'eval "$(direnv hook {kind})"'
    direnv_step = "_direnv_hook"
    if kind == "fish":
        direnv = "direnv hook fish | source"
        direnv_step = "__direnv_export_eval"
    result = {
        "mpsd, steady": (ours, "_mpsd_hook"),
        "mpsd, cd every prompt": (ours, cd_step.format(hook="_mpsd_hook")),
    }
    if kind == "bash":
        # The way bash before 5.1 (macOS's /bin/bash 3.2) reads the file: line by line.
        result["mpsd, steady, bash<5.1"] = (f"{ours}; _MPSD_LINEWISE=1", "_mpsd_hook")
    if shutil.which("direnv"):
        result["direnv, no .envrc"] = (direnv, direnv_step)
    return result


def environment(tmp: Path) -> dict[str, str]:
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(tmp / "home"),
        "MPSD_CONFIG_DIR": str(tmp / "config"),
        "XDG_CONFIG_HOME": str(tmp / "xdg-config"),
        "XDG_DATA_HOME": str(tmp / "xdg-data"),
        "LC_ALL": "C",
    }


def measure(kind: str, setup: str, step: str, calls: int, tmp: Path) -> int:
    script = TIMERS[kind].format(setup=setup, step=step, calls=calls, start=tmp / "work" / "proj")
    out = subprocess.run(
        [*ARGV[kind], script], env=environment(tmp), capture_output=True, text=True, check=True
    )
    return int(out.stdout.strip().splitlines()[-1])


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
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="mpsd-bench-") as name:
        tmp = Path(name)
        for sub in ("home", "config", "xdg-config", "xdg-data", "work/proj/src", "work/a"):
            (tmp / sub).mkdir(parents=True)
        (tmp / "config" / "limits.toml").write_text(
            LIMITS.format(project=tmp / "work" / "proj", other=tmp / "work" / "other")
        )
        load = os.getloadavg()[0]
        print(f"load average at start: {load:.2f} on {os.cpu_count()} CPUs")
        print(f"{'shell':6} {'hook':24} {'µs/prompt':>10} {'min':>8} {'forks/prompt':>13}")
        summary = []
        for kind in ("bash", "zsh", "fish"):
            if not shutil.which(kind):
                print(f"{kind:6} (not installed)")
                continue
            medians: dict[str, float] = {}
            for label, (setup, step) in hooks(kind, tmp).items():
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
        print(f"load average at end: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
