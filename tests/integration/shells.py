"""Drive real interactive bash and zsh processes (no rc files of the user's) with pexpect."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pexpect

ROOT = Path(__file__).resolve().parents[2]
HOOKS = {kind: ROOT / "shell" / f"mpsd.{kind}" for kind in ("bash", "zsh", "fish")}
ARGV = {
    "bash": ["bash", "--norc", "--noprofile", "-i"],
    "zsh": ["zsh", "-f", "-i"],
    "fish": ["fish", "--no-config", "-i"],
}
# Run one script non-interactively, without the user's files.
SCRIPT_ARGV = {
    "bash": ["bash", "--norc", "-c"],
    "zsh": ["zsh", "-f", "-c"],
    "fish": ["fish", "--no-config", "-c"],
}
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
    lines.append("mlx_limit = true")
    return "\n".join(lines) + "\n"


LIMITS_CAP = 256 * 1024  # the largest limits.toml the hooks read; mpsd never writes more


def padded_limits(size: int, project: str, *, filler: str = "projects") -> str:
    """limits.toml of exactly ``size`` bytes opting ``project`` in (listed last), the rest taken
    by other projects (``filler="projects"``) or by comment lines at the end ("comments", or
    "wide comments": of two-byte characters, 100 bytes and 50 characters a line)."""
    base = limits_text(projects=("/x", project))
    if filler in ("comments", "wide comments"):
        lines, rest = divmod(size - len(base.encode()), 100)
        assert lines >= 1, size
        line = "#" + ("é" * 49 if filler == "wide comments" else "x" * 98) + "\n"
        return base + line * (lines - 1) + "#" + "x" * (98 + rest) + "\n"
    head, _, tail = base.partition('    "/x",\n')
    others, used, i = [], len(base.encode()) - len('    "/x",\n'), 0
    while True:
        line = f'    "/Users/someone/code/project-{i:06d}",\n'
        if used + len(line) > size:
            break
        others.append(line)
        used += len(line)
        i += 1
    # The bytes left over: one more project line, padded (a longer path).
    last = others.pop()
    used -= len(last)
    others.append(last.replace("project-", "project-" + "p" * (size - used - len(last))))
    text = head + "".join(others) + tail
    assert len(text.encode()) == size, (len(text.encode()), size)
    return text


def opted_in_project(tmp_path: Path) -> Path:
    """A project (physical path, with a src/ inside) that limits.toml at mpsd's config dir opts
    in, with 0.77 and 0.7 as its ratios."""
    from mpsd import paths

    path = (tmp_path / "proj").resolve()
    (path / "src").mkdir(parents=True)
    paths.config_dir().mkdir(parents=True, exist_ok=True)
    paths.limits_file().write_text(limits_text("0.77", "0.7", (str(path),)))
    return path


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
        self.count = 0
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
        elif kind == "bash":
            setup = "PS1='<P:$?:P> '"
        else:
            # fish repaints its prompt freely: commands are framed by markers instead (run()).
            setup = (
                "function fish_prompt; set -g _prompt_status $status; "
                "printf '<P:%s:P> ' $status; end; "
                "function fish_right_prompt; end; set -g fish_greeting ''; "
                "set -g fish_autosuggestion_enabled 0"
            )
        self.child.sendline(setup)
        self.child.expect(PROMPT)
        if before:
            self.run(before)
        if load:
            self.run(f"source '{HOOKS[kind]}'")

    def run(self, command: str, timeout: float = -1) -> tuple[list[str], int]:
        """Send one command line; return its output lines (the echo left out) and ``$?``.
        ``timeout``: seconds to wait for the prompt (default: the spawn's 20)."""
        if self.kind == "fish":
            return self._run_framed(command, timeout)
        self.child.sendline(command)
        self.child.expect(PROMPT, timeout=timeout)
        lines = self.child.before.replace("\r", "").split("\n")
        # The first line is the terminal's echo of the command.
        output = [line for line in lines[1:] if line.strip()]
        return output, int(self.child.match.group(1))

    def _run_framed(self, command: str, timeout: float = -1) -> tuple[list[str], int]:
        # The echo holds `%s`, the output the number: only the output matches the markers.
        self.count += 1
        n = self.count
        middle = f"{command}; " if command.strip() else ""
        self.child.sendline(f"printf '@B%s@\\n' {n}; {middle}printf '\\n@S%s_%s@\\n' $status {n}")
        self.child.expect(f"@B{n}@\r?\n", timeout=timeout)
        self.child.expect(f"@S(\\d+)_{n}@", timeout=timeout)
        status = int(self.child.match.group(1))
        output = [line for line in self.child.before.replace("\r", "").split("\n") if line.strip()]
        return output, status

    def unset(self, name: str) -> None:
        self.quiet(f"set -e {name}" if self.kind == "fish" else f"unset {name}")

    def quiet(self, command: str) -> int:
        """Run ``command`` and insist that nothing at all was printed (the hook is silent)."""
        output, status = self.run(command)
        assert output == [], f"{self.kind}: {command!r} printed {output!r}"
        return status

    def values(self) -> tuple[str, str]:
        """The two variables as this shell holds them ('unset' when unset)."""
        if self.kind == "fish":
            show = 'set -q {0}; and echo "<${0}>"; or echo "<unset>"'
            output, _ = self.run(
                f"printf 'HIGH=%s LOW=%s\\n' ({show.format(HIGH)}) ({show.format(LOW)})"
            )
            match = _VALUES.search("\n".join(output))
            assert match is not None, output
            return match.group(1), match.group(2)
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
