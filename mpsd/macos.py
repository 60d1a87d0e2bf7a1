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


# --- vm_stat -----------------------------------------------------------------------------

_PAGE_SIZE = re.compile(r"page size of (\d+) bytes")


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
    match = _PAGE_SIZE.search(text)
    counters: dict[str, int] = {}
    for line in text.splitlines():
        label, sep, value = line.partition(":")
        value = value.strip()
        if not sep or not value.endswith("."):
            continue
        digits = value[:-1].strip()
        if digits.isdigit():
            counters[_key(label)] = int(digits)
    return VmStat(int(match.group(1)) if match else None, counters)


# --- memory_pressure ---------------------------------------------------------------------

_MP_HEADER = re.compile(
    r"The system has (\d+) \((\d+) pages with a page size of (\d+)\)", re.IGNORECASE
)
_MP_PERCENT = re.compile(r"System-wide memory free percentage:\s*(\d+)\s*%")


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
    header = _MP_HEADER.search(text)
    percent = _MP_PERCENT.search(text)
    counters: dict[str, int] = {}
    for line in text.splitlines():
        label, sep, value = line.partition(":")
        value = value.strip()
        if sep and value.isdigit() and not label.lstrip().startswith("System-wide"):
            counters[_key(label)] = int(value)
    return MemoryPressure(
        total_bytes=int(header.group(1)) if header else None,
        total_pages=int(header.group(2)) if header else None,
        page_size=int(header.group(3)) if header else None,
        free_percent=int(percent.group(1)) if percent else None,
        counters=counters,
    )


# --- sysctl ------------------------------------------------------------------------------

_SYSCTL_LINE = re.compile(r"^\s*([A-Za-z_][\w.]*)\s*:\s?(.*?)\s*$")


def parse_sysctl(text: str) -> dict[str, str]:
    """``sysctl name...`` output (one or many keys) -> {name: value text}. The write form
    ``name: old -> new`` (``sudo sysctl name=new``) gives the new value."""
    values: dict[str, str] = {}
    for line in text.splitlines():
        match = _SYSCTL_LINE.match(line)
        if not match or "." not in match.group(1):
            continue
        value = match.group(2)
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
    return int(value) if re.fullmatch(r"-?\d+", value) else None


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
    for line in text.splitlines():
        if "total" not in line:
            continue
        items = {
            name: round(_number(value) * _BINARY[unit or "B"])
            for name, value, unit in _SWAP_ITEM.findall(line)
        }
        if {"total", "used", "free"} <= items.keys():
            return SwapUsage(items["total"], items["used"], items["free"], "encrypted" in line)
    return None


# --- top -l 1 ----------------------------------------------------------------------------

_PHYSMEM_ITEM = re.compile(r"(\d+(?:[.,]\d+)?)([BKMGT])\s+([a-z]+)")
_TOP_SWAP = re.compile(r"(\d+)\(\d+\)\s+(swapins|swapouts)")


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
    physmem = next((ln for ln in text.splitlines() if ln.lstrip().startswith("PhysMem:")), None)
    if physmem is None:
        return None
    items = {
        word: round(_number(value) * _BINARY[unit])
        for value, unit, word in _PHYSMEM_ITEM.findall(physmem)
    }
    swap = {word: int(count) for count, word in _TOP_SWAP.findall(text)}
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


def _figure(kind: str, value: str, unit: int, form: str) -> LogFigure:
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
    r"^(?P<prefix>.*?)recommendedMaxWorkingSetSize\s*[=:]\s*(?P<value>\d+(?:[.,]\d+)?)\s*"
    r"(?P<unit>bytes|B|KB|KiB|MB|MiB|GB|GiB|TiB)?",
    re.MULTILINE,
)
_ALLOC = re.compile(
    r"^(?P<prefix>\S*).*?allocated.*?size\s*=\s*[\d.]+\s*(?P<size_unit>MiB|MB)?.*?"
    r"\(\s*[\d.]+\s*/\s*(?P<value>\d+(?:\.\d+)?)\s*\)",
    re.MULTILINE,
)
_OLLAMA_RAM = re.compile(r'msg="system memory".*?\btotal="(\d+(?:\.\d+)?) (B|KiB|MiB|GiB|TiB)"')
_OLLAMA_METAL = re.compile(
    r'msg="inference compute".*?library=Metal.*?\btotal="(\d+(?:\.\d+)?) (B|KiB|MiB|GiB|TiB)"'
)
_MLX = re.compile(r"""["']max_recommended_working_set_size["']\s*:\s*(\d+)""")
_LIST_DEVICES = re.compile(r"^\s*MTL\d+:.*\((\d+) MiB, \d+ MiB free\)", re.MULTILINE)
_TORCH_REPL = re.compile(
    r"recommended_max_memory\(\)\s*(?:/\s*(?P<div>1024\s*\*\*\s*[0-3]|2\s*\*\*\s*\d+|1e\d))?"
    r"\s*\n\s*(?P<value>\d+(?:\.\d+)?)\s*$",
    re.MULTILINE,
)
_LLMFIT = re.compile(r"(\d+(?:\.\d+)?) GB GPU-available of (\d+(?:\.\d+)?) GB shared")
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

    def add(figure: LogFigure) -> None:
        if figure not in figures:
            figures.append(figure)

    # Allocation lines first: '( used /  max)' in MiB when the size is labelled MiB
    # (ggml since Dec 2023) or the function is ggml_backend_metal_*; mid-2023 lines
    # said 'MB' for MiB too, but whisper.cpp's of Nov 2023 printed 1e6-byte MB.
    sure: list[LogFigure] = []
    unsure: list[re.Match[str]] = []
    for match in _ALLOC.finditer(text):
        if match.group("size_unit") == "MiB" or match.group("prefix").startswith("ggml_backend"):
            sure.append(_figure(RECOMMENDED_MAX, match.group("value"), MIB, "ggml-alloc"))
        else:
            unsure.append(match)
    rmwss: list[LogFigure] = []
    for match in _RMWSS.finditer(text):
        value, unit = match.group("value"), match.group("unit") or "bytes"
        form = "ggml" if "ggml" in match.group("prefix") else "log"
        if unit in _UNITS:
            scale = _UNITS[unit]
        elif unit == "GB":
            scale = GIB
        elif "ggml_metal_device_init" in match.group("prefix"):
            scale = 1_000_000  # ggml of 2025 on: always 1e6-byte MB
        else:
            scale = _mb_unit(value, sure, 1_000_000)
        rmwss.append(_figure(RECOMMENDED_MAX, value, scale, form))
    for match in unsure:
        value = match.group("value")
        sure.append(_figure(RECOMMENDED_MAX, value, _mb_unit(value, rmwss, MIB), "ggml-alloc"))
    for figure in rmwss + sure:
        add(figure)

    for number, unit in _OLLAMA_METAL.findall(text):
        add(_figure(RECOMMENDED_MAX, number, _UNITS[unit], "ollama"))
    for number, unit in _OLLAMA_RAM.findall(text):
        add(_figure(RAM, number, _UNITS[unit], "ollama"))
    for number in _MLX.findall(text):
        add(_figure(RECOMMENDED_MAX, number, 1, "mlx"))
    for number in _LIST_DEVICES.findall(text):
        add(_figure(RECOMMENDED_MAX, number, MIB, "llama-server"))
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
