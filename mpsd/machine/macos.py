"""Parsers for the text macOS memory tools print. Pure: text in, numbers out, no I/O.

Every parser accepts what people paste: partial outputs (``| head``, ``| tail``, a
paste cut mid-line), padding that changed between macOS versions, trailing
spaces, lines this code does not know (ignored), and the comma decimal separator
of a non-C locale. Byte counts are ints; a figure the text does not contain is
``None``. Tested against the recorded outputs in ``fixtures/macos/``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

KIB = 1 << 10
MIB = 1 << 20
GIB = 1 << 30
TIB = 1 << 40

# top, sysctl vm.swapusage and PyTorch print powers of 1024 whatever the label.
_BINARY = {"B": 1, "K": KIB, "M": MIB, "G": GIB, "T": TIB}


def _key(label: str) -> str:
    """'File-backed pages' -> 'file_backed_pages'; '"Translation faults"' -> 'translation_faults'"""
    return re.sub(r"[^a-z0-9]+", "_", label.strip().strip('"').lower()).strip("_")


def _number(text: str) -> float:
    """A decimal printed in any locale: '379,25' and '379.25' are the same number."""
    return float(text.replace(",", "."))


# No tool prints a line this long or a number this wide: longer ones are noise in a
# paste, and skipping them keeps every parser linear and every conversion finite.
MAX_LINE = 4096
MAX_DIGITS = 24


def _clip(text: str) -> str:
    if all(len(line) <= MAX_LINE for line in text.splitlines()):
        return text
    return "\n".join(line for line in text.splitlines() if len(line) <= MAX_LINE)


def _sane(value: str) -> bool:
    return len(value) <= MAX_DIGITS


# --- vm_stat -----------------------------------------------------------------------------

_PAGE_SIZE = re.compile(r"page size of (\d{1,20}) bytes")


@dataclass(frozen=True)
class VmStat:
    """``vm_stat`` output. ``counters`` holds every ``Label: N.`` line, keyed by the
    label in snake case (``pages_free``, ``file_backed_pages``, ``swapouts``...)."""

    page_size: int | None
    counters: Mapping[str, int] = field(default_factory=dict)

    def get(self, key: str) -> int | None:
        return self.counters.get(key)

    @property
    def swapouts(self) -> int | None:
        return self.counters.get("swapouts")

    def available_pages(self) -> int | None:
        """free + speculative + file-backed + purgeable pages (Activity Monitor's free +
        cached files). None without "Pages free"; a component the output lacks (pre-10.9
        ``vm_stat`` has no file-backed or purgeable line) counts 0, so this is a lower bound."""
        free = self.counters.get("pages_free")
        if free is None:
            return None
        rest = ("pages_speculative", "file_backed_pages", "pages_purgeable")
        return free + sum(self.counters.get(k, 0) for k in rest)

    def available_bytes(self, page_size: int | None = None) -> int | None:
        pages = self.available_pages()
        size = self.page_size or page_size
        if pages is None or size is None:
            return None
        return pages * size


def parse_vm_stat(text: str) -> VmStat:
    """Parse ``vm_stat`` (not its interval mode). Lines are split on the first colon and
    the value must end with the final dot: a line cut mid-number in a paste has no dot
    and is dropped rather than read as a smaller number."""
    text = _clip(text)
    match = _PAGE_SIZE.search(text)
    counters: dict[str, int] = {}
    for line in text.splitlines():
        label, sep, value = line.partition(":")
        value = value.strip()
        if not sep or not value.endswith("."):
            continue
        digits = value[:-1].strip()
        if digits.isdigit() and _sane(digits):
            counters[_key(label)] = int(digits)
    return VmStat(int(match.group(1)) if match else None, counters)


# --- memory_pressure ---------------------------------------------------------------------

_MP_HEADER = re.compile(
    r"The system has (\d{1,20}) \((\d{1,20}) pages with a page size of (\d{1,20})\)",
    re.IGNORECASE,
)
_MP_PERCENT = re.compile(r"System-wide memory free percentage:\s*(\d{1,3})\s*%")


@dataclass(frozen=True)
class MemoryPressure:
    """``memory_pressure`` (also ``-Q`` and partial pastes). ``counters`` keyed like
    ``VmStat.counters`` (``pages_free``, ``swapouts``, ``pages_used_by_compressor``...)."""

    total_bytes: int | None
    total_pages: int | None
    page_size: int | None
    free_percent: int | None
    counters: Mapping[str, int] = field(default_factory=dict)


def parse_memory_pressure(text: str) -> MemoryPressure:
    text = _clip(text)
    header = _MP_HEADER.search(text)
    percent = _MP_PERCENT.search(text)
    counters: dict[str, int] = {}
    for line in text.splitlines():
        label, sep, value = line.partition(":")
        value = value.strip()
        if sep and value.isdigit() and _sane(value) and not label.startswith("System-wide"):
            counters[_key(label)] = int(value)
    return MemoryPressure(
        total_bytes=int(header.group(1)) if header else None,
        total_pages=int(header.group(2)) if header else None,
        page_size=int(header.group(3)) if header else None,
        free_percent=int(percent.group(1)) if percent else None,
        counters=counters,
    )


# --- sysctl ------------------------------------------------------------------------------

_SYSCTL_LINE = re.compile(r"^\s*([A-Za-z_][\w.]*)\s*:(.*)$")


def parse_sysctl(text: str) -> dict[str, str]:
    """``sysctl name...`` output (one or many keys) -> {name: value text}. The write form
    ``name: old -> new`` (``sudo sysctl name=new``) gives the new value."""
    values: dict[str, str] = {}
    for line in _clip(text).splitlines():
        match = _SYSCTL_LINE.match(line)
        if not match or "." not in match.group(1):
            continue
        value = match.group(2).strip()
        if "->" in value:
            value = value.rsplit("->", 1)[1].strip()
        values[match.group(1)] = value
    return values


def sysctl_int(text: str, name: str) -> int | None:
    """An integer sysctl from ``sysctl name`` output (alone or in a dump) or from
    ``sysctl -n name`` (the bare value). None when absent or not an integer."""
    value = parse_sysctl(text).get(name)
    if value is None:
        stripped = text.strip()
        value = stripped if "\n" not in stripped else None
    if value is None:
        return None
    value = value.strip()
    return int(value) if re.fullmatch(r"-?\d+", value) and _sane(value) else None


@dataclass(frozen=True)
class SwapUsage:
    total_bytes: int
    used_bytes: int
    free_bytes: int
    encrypted: bool


_SWAP_ITEM = re.compile(r"\b(total|used|free)\s*=\s*(\d+(?:[.,]\d+)?)\s*([BKMGT]?)")


def parse_swapusage(text: str) -> SwapUsage | None:
    """``sysctl vm.swapusage`` (also ``-n`` and inside a dump): 'total = 2048.00M ...'.
    M means MiB; the decimal separator follows the locale (``1024,00M``)."""
    for line in _clip(text).splitlines():
        if "total" not in line:
            continue
        items = {
            name: round(_number(value) * _BINARY[unit or "B"])
            for name, value, unit in _SWAP_ITEM.findall(line)
            if _sane(value)
        }
        if {"total", "used", "free"} <= items.keys():
            return SwapUsage(items["total"], items["used"], items["free"], "encrypted" in line)
    return None


# --- top -l 1 ----------------------------------------------------------------------------

# (?<!...): a match only starts at the start of a number, so long digit runs stay linear.
_PHYSMEM_ITEM = re.compile(r"(?<![\d.,])(\d+(?:[.,]\d+)?)([BKMGT])\s+([a-z]+)")
_TOP_SWAP = re.compile(r"(?<!\d)(\d+)\(\d+\)\s+(swapins|swapouts)")


@dataclass(frozen=True)
class PhysMem:
    """The ``PhysMem:`` line of ``top -l 1`` (every macOS form) and, when the paste has
    it, the ``VM:`` line's cumulative swapins/swapouts."""

    used_bytes: int | None
    unused_bytes: int | None
    wired_bytes: int | None
    compressor_bytes: int | None
    items: Mapping[str, int]
    swapins: int | None = None
    swapouts: int | None = None


def parse_top(text: str) -> PhysMem | None:
    """None when the text has no ``PhysMem:`` line. Units K/M/G/T are powers of 1024."""
    text = _clip(text)
    physmem = next((ln for ln in text.splitlines() if ln.lstrip().startswith("PhysMem:")), None)
    if physmem is None:
        return None
    items = {
        word: round(_number(value) * _BINARY[unit])
        for value, unit, word in _PHYSMEM_ITEM.findall(physmem)
        if _sane(value)
    }
    swap = {word: int(count) for count, word in _TOP_SWAP.findall(text) if _sane(count)}
    return PhysMem(
        used_bytes=items.get("used"),
        # OS X 10.8 and older said "free" where later versions say "unused".
        unused_bytes=items.get("unused", items.get("free")),
        wired_bytes=items.get("wired"),
        compressor_bytes=items.get("compressor"),
        items=items,
        swapins=swap.get("swapins"),
        swapouts=swap.get("swapouts"),
    )


# --- recommendedMaxWorkingSetSize in tools' logs -----------------------------------------

RECOMMENDED_MAX = "recommended_max"
RAM = "ram"
MAX_ALLOWED = "max_allowed"


@dataclass(frozen=True)
class LogFigure:
    """One figure a log line states. ``kind``: ``recommended_max`` (Metal's
    recommendedMaxWorkingSetSize), ``ram`` (the machine's memory), ``max_allowed``
    (PyTorch's cap: the watermark ratio x recommended max, ratio not printed).
    ``precision``: half a unit of the last printed digit, in bytes. ``form``: which
    tool's wording it came from."""

    kind: str
    bytes: int
    precision: int
    form: str


_UNITS = {
    "bytes": 1,
    "B": 1,
    "KB": KIB,
    "KiB": KIB,
    "MiB": MIB,
    "GiB": GIB,
    "TiB": TIB,
}
_FRACTIONS = (1.0, 2 / 3, 3 / 4)


def _figure(kind: str, value: str, unit: int, form: str) -> LogFigure | None:
    if not _sane(value):
        return None
    decimals = len(value.replace(",", ".").partition(".")[2])
    precision = max(1, round(unit * 0.5 * 10**-decimals)) if unit > 1 else 0
    return LogFigure(kind, round(_number(value) * unit), precision, form)


def _whole_gib_share(size: float, tolerance: float) -> bool:
    """Is ``size`` bytes 1, 2/3 or 3/4 of a whole number of GiB (what Metal reports
    for a RAM size) within ``tolerance`` bytes?"""
    for share in _FRACTIONS:
        ram = size / share
        if abs(ram - round(ram / GIB) * GIB) <= tolerance / share and ram >= GIB / 2:
            return True
    return False


def _mb_unit(value: str, known: list[LogFigure], default: int) -> int:
    """Which unit a ggml 'MB' figure is in. ggml printed recommendedMaxWorkingSetSize
    divided by 1024*1024 until late 2023 and by 1e6 since, both labelled 'MB'. Decide by
    (1) another figure in the same paste whose unit is known (an allocation line in
    MiB), (2) which reading is a whole-GiB share of RAM, (3) ``default``."""
    number = _number(value)
    for unit in (MIB, 1_000_000):
        for other in known:
            if abs(number * unit - other.bytes) <= other.precision + unit * 0.006:
                return unit
    tolerance = 0.02 * MIB
    as_mib = _whole_gib_share(number * MIB, tolerance)
    as_mb = _whole_gib_share(number * 1e6, tolerance)
    if as_mib != as_mb:
        return MIB if as_mib else 1_000_000
    return default


_RMWSS = re.compile(
    r"recommendedMaxWorkingSetSize\s*[=:]\s*(?P<value>\d+(?:[.,]\d+)?)\s*"
    r"(?P<unit>bytes|B|KB|KiB|MB|MiB|GB|GiB|TiB)?"
)
_ALLOC_SIZE = re.compile(r"size\s*=\s*[\d.]+\s*(MiB|MB)")
_ALLOC_MAX = re.compile(r"\(\s*\d+(?:\.\d+)?\s*/\s*(\d+(?:\.\d+)?)\s*\)")
_OLLAMA_TOTAL = re.compile(r'\btotal="(\d+(?:\.\d+)?) (B|KiB|MiB|GiB|TiB)"')
_MLX = re.compile(r"""["']max_recommended_working_set_size["']\s*:\s*(\d+)""")
_LIST_DEVICES = re.compile(r"^\s*MTL\d+:.*?\((\d+) MiB, \d+ MiB free\)")
_TORCH_REPL = re.compile(
    r"recommended_max_memory\(\)\s*(?:/\s*(?P<div>1024\s*\*\*\s*[0-3]|2\s*\*\*\s*\d{1,2}|1e\d))?"
    r"\s*\n\s*(?P<value>\d+(?:\.\d+)?)\s*$",
    re.MULTILINE,
)
_LLMFIT = re.compile(r"(?<![\d.])(\d+(?:\.\d+)?) GB GPU-available of (\d+(?:\.\d+)?) GB shared")
_MAX_ALLOWED = re.compile(r"max allowed:\s*(\d+(?:\.\d+)?)\s*(bytes|KB|MB|GB|KiB|MiB|GiB)")


def _divisor(text: str | None) -> int:
    if not text:
        return 1
    compact = text.replace(" ", "")
    base, _, exponent = compact.partition("**")
    if exponent:
        return int(int(base) ** int(exponent))
    return int(float(compact))


def parse_working_set_log(text: str) -> list[LogFigure]:
    """Every recommendedMaxWorkingSetSize (and RAM size) figure that llama.cpp/ggml,
    whisper.cpp, ollama, mlx, llama-server, llmfit or a PyTorch REPL printed in ``text``,
    and PyTorch's "max allowed" from MPS out-of-memory errors. In text order per form,
    duplicates dropped."""
    figures: list[LogFigure] = []
    seen: set[LogFigure] = set()

    def add(figure: LogFigure | None) -> None:
        if figure is not None and figure not in seen:
            seen.add(figure)
            figures.append(figure)

    def put(target: list[LogFigure], figure: LogFigure | None) -> None:
        if figure is not None:
            target.append(figure)

    # Allocation lines first: '( used /  max)' in MiB when the size is labelled MiB
    # (ggml since Dec 2023) or the function is ggml_backend_metal_*; mid-2023 lines
    # said 'MB' for MiB too, but whisper.cpp's of Nov 2023 printed 1e6-byte MB.
    # Line by line, with patterns anchored on a keyword: a pasted log can be long.
    lines = _clip(text).splitlines()
    text = "\n".join(lines)
    sure: list[LogFigure] = []
    unsure: list[str] = []
    rmwss: list[tuple[str, str, str]] = []
    ollama: list[LogFigure] = []
    for line in lines:
        at = line.find("allocated")
        if at >= 0 and (denominator := _ALLOC_MAX.search(line, at)):
            size = _ALLOC_SIZE.search(line, at)
            if (size and size.group(1) == "MiB") or line.lstrip().startswith("ggml_backend"):
                put(sure, _figure(RECOMMENDED_MAX, denominator.group(1), MIB, "ggml-alloc"))
            elif _sane(denominator.group(1)):
                unsure.append(denominator.group(1))
        if "recommendedMaxWorkingSetSize" in line:
            for match in _RMWSS.finditer(line):
                rmwss.append((line[: match.start()], match.group("value"), match.group("unit")))
        for marker, kind in (
            ('msg="inference compute"', RECOMMENDED_MAX),
            ('msg="system memory"', RAM),
        ):
            at = line.find(marker)
            if at < 0 or (kind == RECOMMENDED_MAX and "library=Metal" not in line):
                continue
            if total := _OLLAMA_TOTAL.search(line, at):
                put(ollama, _figure(kind, total.group(1), _UNITS[total.group(2)], "ollama"))
    stated: list[LogFigure] = []
    for prefix, value, unit in rmwss:
        if not _sane(value):
            continue
        form = "ggml" if "ggml" in prefix else "log"
        if unit in _UNITS:
            scale = _UNITS[unit]
        elif unit == "GB":
            scale = GIB
        elif not unit:
            scale = 1
        elif "ggml_metal_device_init" in prefix:
            scale = 1_000_000  # ggml of 2025 on: always 1e6-byte MB
        else:
            scale = _mb_unit(value, sure, 1_000_000)
        put(stated, _figure(RECOMMENDED_MAX, value, scale, form))
    for value in unsure:
        put(sure, _figure(RECOMMENDED_MAX, value, _mb_unit(value, stated, MIB), "ggml-alloc"))
    for figure in stated + sure + sorted(ollama, key=lambda f: f.kind != RECOMMENDED_MAX):
        add(figure)

    for number in _MLX.findall(text):
        add(_figure(RECOMMENDED_MAX, number, 1, "mlx"))
    for line in lines:
        if line.lstrip().startswith("MTL") and (device := _LIST_DEVICES.match(line)):
            add(_figure(RECOMMENDED_MAX, device.group(1), MIB, "llama-server"))
    for match in _TORCH_REPL.finditer(text):
        divisor = _divisor(match.group("div"))
        add(_figure(RECOMMENDED_MAX, match.group("value"), divisor, "torch"))
    for available, shared in _LLMFIT.findall(text):
        # llmfit's "GB" are GiB: a 16 GB Mac shows "of 16.00 GB shared".
        add(_figure(RECOMMENDED_MAX, available, GIB, "llmfit"))
        add(_figure(RAM, shared, GIB, "llmfit"))
    for number, unit in _MAX_ALLOWED.findall(text):
        # PyTorch's KB/MB/GB are powers of 1024, like its KiB/MiB/GiB.
        scale = {"KB": KIB, "MB": MIB, "GB": GIB}.get(unit) or _UNITS[unit]
        add(_figure(MAX_ALLOWED, number, scale, "pytorch"))
    return figures


def recommended_max_from_log(text: str) -> int | None:
    """The first recommendedMaxWorkingSetSize figure in ``text``, in bytes."""
    for figure in parse_working_set_log(text):
        if figure.kind == RECOMMENDED_MAX:
            return figure.bytes
    return None
