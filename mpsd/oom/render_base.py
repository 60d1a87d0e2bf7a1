"""What every explanation shares: styles, the table, the fix (both variables)."""

from __future__ import annotations

from mpsd.oom import macs
from mpsd.oom.finding import Finding
from mpsd.oom.known import Known
from mpsd.oom.units import format_size

# The names' home is mpsd.ratio; explain's engine imports nothing of mpsd, so it keeps a copy.
HIGH = "PYTORCH_MPS_HIGH_WATERMARK_RATIO"
LOW = "PYTORCH_MPS_LOW_WATERMARK_RATIO"


class Style:
    """ANSI styles, or nothing (not a terminal, or NO_COLOR)."""

    def __init__(self, color: bool) -> None:
        self.color = color

    def _wrap(self, code: str, text: str) -> str:
        return f"\x1b[{code}m{text}\x1b[0m" if self.color else text

    def title(self, text: str) -> str:
        return self._wrap("1", text)

    def head(self, text: str) -> str:
        return self._wrap("1;36", text)

    def dim(self, text: str) -> str:
        return self._wrap("2", text)

    def warn(self, text: str) -> str:
        return self._wrap("33", text)

    def cmd(self, text: str) -> str:
        return self._wrap("32", text)


def ratio_text(value: float) -> str:
    """A ratio as a user would type it: every decimal it has (limits.toml may hold more than
    two), no trailing zeros. Never rounded to fewer: the fix exports exactly this text."""
    if value != value:
        return "nan"
    return f"{value:.{macs.decimals_of(value)}f}".rstrip("0").rstrip(".")


def mac_name(ram_gb: int) -> str:
    """ "a 16 GB Mac", "an 8 GB Mac"."""
    article = "an" if str(ram_gb).startswith("8") or ram_gb in (11, 18) else "a"
    return f"{article} {ram_gb} GB Mac"


def table(rows: list[tuple[str, str, str]], style: Style) -> list[str]:
    """Aligned rows: label, value (right-aligned), meaning."""
    wl = max(len(r[0]) for r in rows)
    wv = max(len(r[1]) for r in rows)
    return [
        f"  {label:<{wl}}  {value:>{wv}}  {style.dim(meaning)}" for label, value, meaning in rows
    ]


ARTICLE = '"MPS backend out of memory on a Mac: what the numbers mean and how to set the watermark"'


class Base:
    """The explanation's context: what mpsd knows of this Mac (limits.toml), the style.

    Every size is printed in powers of 1024 spelt GiB/MiB/KiB, whatever the message spelt
    (PyTorch 2.0 to 2.7 print them "GB"/"MB"/"KB"); ``units_note`` says so, once."""

    def __init__(self, limits: Known | None, style: Style) -> None:
        self.limits = limits
        self.style = style
        self.units_said = False

    def size(self, n: float, f: Finding | None = None) -> str:
        return format_size(n)

    def units_note(self, f: Finding) -> list[str]:
        """The line that says PyTorch's "GB" are GiB, under the first table that needs it."""
        if f.binary_units or self.units_said:
            return []
        self.units_said = True
        return [
            self.style.dim(
                '  (The message\'s "GB" and "MB" are GiB and MiB, powers of 1024: the units '
                "used here.)"
            )
        ]

    # --- shared pieces ------------------------------------------------------------
    def fix_lines(self, ratio_hint: str, first: str = "") -> list[str]:
        """The fix: both variables, mpsd's value, opting the project in. ``ratio_hint``
        follows the value; ``first`` comes before everything (what matters more)."""
        s = self.style
        if self.limits is not None:
            high, low = self.limits.high_watermark_ratio, self.limits.low_watermark_ratio
            rm = self.limits.recommended_max_bytes
            if self.limits.estimated:
                # The real cap is high x the real maximum, which the estimate only approaches.
                cap, of = f"about {format_size(macs.cap_of(high, rm))}", ", an estimated maximum"
            else:
                cap, of = format_size(macs.cap_of(high, rm)), ""
            why = (
                f"mpsd's current value for this Mac: a cap of {cap} "
                f"({ratio_text(high)} x {format_size(rm)}{of})"
            )
        else:
            high = low = macs.FALLBACK_RATIO
            why = (
                f"{ratio_text(high)} is a safe start: in the article {ARTICLE}, 0.8 gave a "
                "clean error and no swap on a 48 GB Mac where 1.0 still swapped; "
                "`mpsd install` measures the right value for this Mac"
            )
        lines = [
            f"  {s.cmd(f'export {HIGH}={ratio_text(high)} {LOW}={ratio_text(low)}')}",
            f"  {why}.",
            "  Set both, together, before python starts: LOW must not exceed HIGH, and PyTorch",
            "  reads them once, when MPS starts. Never 0.0: that removes the cap and invites swap.",
            f"  Or let mpsd set them for every python run in the project: {s.cmd('mpsd enable')}"
            " (in the project's directory).",
        ]
        if ratio_hint:
            lines.insert(2, f"  {ratio_hint}")
        if first:
            lines.insert(0, f"  {first}")
        return lines
