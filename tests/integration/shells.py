"""Drive real interactive bash and zsh processes (no rc files of the user's) with pexpect."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pexpect

ROOT = Path(__file__).resolve().parents[2]
HOOKS = {"bash": ROOT / "shell" / "mpsd.bash", "zsh": ROOT / "shell" / "mpsd.zsh"}
ARGV = {"bash": ["bash", "--norc", "--noprofile", "-i"], "zsh": ["zsh", "-f", "-i"]}
PROMPT = re.compile(r"<P:(\d+):P> ")
HIGH = "PYTORCH_MPS_HIGH_WATERMARK_RATIO"
LOW = "PYTORCH_MPS_LOW_WATERMARK_RATIO"
_VALUES = re.compile(r"HIGH=<([^>]*)> LOW=<([^>]*)>")


def available(kind: str) -> bool:
    """The program is installed (and, for strace, allowed to trace here)."""
    if shutil.which(kind) is None:
        return False
    if kind == "strace":
        import subprocess

        probe = subprocess.run(["strace", "-o", os.devnull, "true"], capture_output=True)
        return probe.returncode == 0
    return True


def limits_text(high: str = "0.77", low: str = "0.7", projects: tuple[str, ...] = ()) -> str:
    """limits.toml as the daemon writes it (tomli-w's form)."""
    lines = [
        f"high_watermark_ratio = {high}",
        f"low_watermark_ratio = {low}",
        "limit_bytes = 30954687948",
        "recommended_max_bytes = 40200893440",
        'recommended_max_source = "torch"',
        "baseline_free_bytes = 39192717312",
        "headroom = 0.8",
        "updated_at = 2026-11-30 05:00:00+00:00",
    ]
    if projects:
        lines.append("projects = [")
        lines.extend(f'    "{p}",' for p in projects)
        lines.append("]")
    else:
        lines.append("projects = []")
    lines.append('baseline_source = "samples"')
    lines.append("sample_count = 12")
    return "\n".join(lines) + "\n"


class Shell:
    """One interactive shell with the hook loaded (unless ``load=False``)."""

    def __init__(
        self,
        kind: str,
        env: dict[str, str],
        cwd: Path,
        *,
        before: str = "",
        load: bool = True,
        argv: list[str] | None = None,
    ) -> None:
        self.kind = kind
        full_env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": env.get("HOME", os.environ.get("HOME", "/tmp")),
            "TERM": "dumb",
            "LC_ALL": "C.UTF-8",
            "PYTHONPATH": os.environ.get("PYTHONPATH", ""),
        }
        full_env.update(env)
        self.child = pexpect.spawn(
            (argv or ARGV[kind])[0],
            (argv or ARGV[kind])[1:],
            env=full_env,
            cwd=str(cwd),
            encoding="utf-8",
            timeout=20,
            dimensions=(50, 400),
        )
        if kind == "zsh":
            setup = "unsetopt PROMPT_SP; PROMPT_EOL_MARK=''; PS1='<P:%?:P> '"
        else:
            setup = "PS1='<P:$?:P> '"
        self.child.sendline(setup)
        self.child.expect(PROMPT)
        if before:
            self.run(before)
        if load:
            self.run(f"source '{HOOKS[kind]}'")

    def run(self, command: str) -> tuple[list[str], int]:
        """Send one command line; return its output lines (the echo left out) and ``$?``."""
        self.child.sendline(command)
        self.child.expect(PROMPT)
        lines = self.child.before.replace("\r", "").split("\n")
        # The first line is the terminal's echo of the command.
        output = [line for line in lines[1:] if line.strip()]
        return output, int(self.child.match.group(1))

    def quiet(self, command: str) -> int:
        """Run ``command`` and insist that nothing at all was printed (the hook is silent)."""
        output, status = self.run(command)
        assert output == [], f"{self.kind}: {command!r} printed {output!r}"
        return status

    def values(self) -> tuple[str, str]:
        """The two variables as this shell holds them ('unset' when unset)."""
        self.child.sendline(
            f'printf \'%s=<%s> %s=<%s>\\n\' HIGH "${{{HIGH}-unset}}" LOW "${{{LOW}-unset}}"'
        )
        self.child.expect(_VALUES)
        high, low = self.child.match.group(1), self.child.match.group(2)
        self.child.expect(PROMPT)
        return high, low

    def exported(self) -> dict[str, str]:
        """The watermark variables a child process (a python) would see."""
        output, _ = self.run("env")
        found = {}
        for line in output:
            name, _, value = line.partition("=")
            if name in (HIGH, LOW):
                found[name] = value
        return found

    def close(self) -> None:
        self.child.sendline("exit")
        self.child.expect(pexpect.EOF)
        self.child.close()
