"""The human explanation of findings: the numbers, the arithmetic, the ratio, the fix.

Pure: findings (and what mpsd knows of this Mac, ``limits.toml``) in, text out. The
text for each family lives in ``render_mps`` and ``render_other``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

from mpsd.oom import finding as fk
from mpsd.oom.finding import Finding
from mpsd.oom.known import Known
from mpsd.oom.render_base import Style
from mpsd.oom.render_mps import MpsText
from mpsd.oom.render_other import OtherText


class Renderer(MpsText, OtherText):
    TITLES: ClassVar[dict[str, str]] = {
        fk.MPS_OOM: "MPS out of memory (PyTorch on Apple Silicon)",
        fk.MPS_INVALID_LOW: "Invalid low watermark ratio (PyTorch MPS)",
        fk.MPS_INVALID_HIGH: "Invalid high watermark ratio (PyTorch MPS)",
        fk.MPS_OTHER: "MPS memory error",
        fk.CUDA_OOM: "CUDA out of memory",
        fk.CPU_OOM: "Out of main memory (PyTorch's CPU allocator)",
    }

    def finding(self, f: Finding) -> list[str]:
        title = self.TITLES[f.kind]
        if f.kind == fk.CUDA_OOM and f.backend and f.backend != "cuda":
            title = f"{f.backend.upper()} out of memory"
        if f.count > 1:
            title += f" (seen {f.count} times)"
        body: dict[str, Callable[[Finding], list[str]]] = {
            fk.MPS_OOM: self.mps_oom,
            fk.MPS_INVALID_LOW: self.watermark,
            fk.MPS_INVALID_HIGH: self.watermark,
            fk.MPS_OTHER: self.mps_other,
            fk.CUDA_OOM: self.cuda,
            fk.CPU_OOM: self.cpu,
        }
        return [self.style.title(title), *body[f.kind](f)]


WIDTH = 88


def _visible(line: str) -> str:
    if "\x1b" not in line:
        return line
    from mpsd.oom.normalize import compiled

    return compiled(r"\x1b\[[\d;]*m").sub("", line)


_UNITS = frozenset(("bytes", "KiB", "MiB", "GiB", "TiB", "KB", "MB", "GB", "TB"))


def _words(line: str) -> list[str]:
    """The words of ``line``, a size's unit kept with its number ("18.13 GiB" is one)."""
    words: list[str] = []
    for word in line.split():
        if words and word.rstrip(".,;:)") in _UNITS and words[-1][-1:].isdigit():
            words[-1] += " " + word
        else:
            words.append(word)
    return words


def _wrap(line: str) -> list[str]:
    """Long prose lines wrapped at WIDTH, at spaces, continuing at their indent (plus the
    width of a leading "Note: "). Table rows (columns apart by two spaces) stay whole."""
    shown = _visible(line)
    body = shown.strip()
    if len(shown) <= WIDTH or "  " in body:
        return [line]
    indent = " " * (len(line) - len(line.lstrip(" ")))
    more = indent + ("      " if "Note:" in shown[: len(indent) + 15] else "")
    out: list[str] = []
    current, width = indent, len(indent)
    for word in _words(line):
        seen = len(_visible(word))
        if current.strip() and width + 1 + seen > WIDTH:
            out.append(current)
            current, width = more, len(more)
        if current.strip():
            current, width = current + " ", width + 1
        current, width = current + word, width + seen
    out.append(current)
    return out


MAX_SHOWN = 20  # a log with more distinct errors is summed up after these


def render(findings: list[Finding], limits: Known | None = None, color: bool = False) -> str:
    """The explanation of every finding (the first MAX_SHOWN), separated by blank lines,
    ending in a newline."""
    r = Renderer(limits, Style(color))
    blocks = []
    for i, f in enumerate(findings[:MAX_SHOWN]):
        lines = r.finding(f)
        if len(findings) > 1:
            lines[0] = f"{i + 1}/{len(findings)}  {lines[0]}"
        blocks.append("\n".join(w for line in lines for w in _wrap(line)))
    if len(findings) > MAX_SHOWN:
        blocks.append(f"... and {len(findings) - MAX_SHOWN} more errors (--json lists them all).")
    return "\n\n".join(blocks) + "\n"
