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
    return f"{value:.2f}".rstrip("0").rstrip(".") if value == value else "nan"


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


class Base:
    """The explanation's context: what mpsd knows of this Mac (limits.toml), the style."""

    def __init__(self, limits: Known | None, style: Style) -> None:
        self.limits = limits
        self.style = style

    def size(self, n: float, f: Finding) -> str:
        return format_size(n, f.binary_units)

    # --- shared pieces ------------------------------------------------------------
    def fix_lines(self, ratio_hint: str) -> list[str]:
        s = self.style
        if self.limits is not None:
            high, low = self.limits.high_watermark_ratio, self.limits.low_watermark_ratio
            why = (
                f"mpsd's current value for this Mac: a cap of "
                f"{format_size(self.limits.limit_bytes)} "
                f"({ratio_text(high)} x {format_size(self.limits.recommended_max_bytes)})"
            )
        else:
            high = low = macs.FALLBACK_RATIO
            why = (
                f"{ratio_text(high)} is a safe start (the article's value on a 48 GB Mac); "
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
        return lines

    # --- MPS out of memory ------------------------------------------------------
