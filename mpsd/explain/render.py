"""The human explanation of findings: the numbers, the arithmetic, the ratio, the fix.

Pure: findings (and what mpsd knows of this Mac, ``limits.toml``) in, text out.
"""

from __future__ import annotations

from mpsd.explain import finding as fk
from mpsd.explain import macs
from mpsd.explain.finding import Finding
from mpsd.explain.units import format_size

TYPE_CHECKING = False  # typing costs start-up; mypy still reads the block below
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import ClassVar

    from mpsd.limits import Limits

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


def _ratio(value: float) -> str:
    return f"{value:.2f}".rstrip("0").rstrip(".") if value == value else "nan"


def _mac(ram_gb: int) -> str:
    """ "a 16 GB Mac", "an 8 GB Mac"."""
    article = "an" if str(ram_gb).startswith("8") or ram_gb in (11, 18) else "a"
    return f"{article} {ram_gb} GB Mac"


def _table(rows: list[tuple[str, str, str]], style: Style) -> list[str]:
    """Aligned rows: label, value (right-aligned), meaning."""
    wl = max(len(r[0]) for r in rows)
    wv = max(len(r[1]) for r in rows)
    return [
        f"  {label:<{wl}}  {value:>{wv}}  {style.dim(meaning)}" for label, value, meaning in rows
    ]


class Renderer:
    def __init__(self, limits: Limits | None, style: Style) -> None:
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
                f"({_ratio(high)} x {format_size(self.limits.recommended_max_bytes)})"
            )
        else:
            high = low = macs.FALLBACK_RATIO
            why = (
                f"{_ratio(high)} is a safe start (the article's value on a 48 GB Mac); "
                "`mpsd install` measures the right value for this Mac"
            )
        lines = [
            f"  {s.cmd(f'export {HIGH}={_ratio(high)} {LOW}={_ratio(low)}')}",
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
    def mps_oom(self, f: Finding) -> list[str]:
        s = self.style
        rows: list[tuple[str, str, str]] = []
        if f.allocated_bytes is not None:
            rows.append(
                (
                    "MPS allocated",
                    self.size(f.allocated_bytes, f),
                    "what PyTorch's MPS allocator holds for your tensors",
                )
            )
        if f.other_bytes is not None:
            rows.append(
                (
                    "other allocations",
                    self.size(f.other_bytes, f),
                    "other GPU memory of this process, outside that allocator",
                )
            )
        if f.requested_bytes is not None:
            pool = f" ({f.pool} pool)" if f.pool else ""
            rows.append(
                ("requested", self.size(f.requested_bytes, f), f"the allocation that failed{pool}")
            )
        if f.max_allowed_bytes is not None:
            rows.append(
                (
                    "max allowed",
                    self.size(f.max_allowed_bytes, f),
                    "the cap: watermark ratio x the Mac's recommended max",
                )
            )
        out = [*_table(rows, s)] if rows else ["  (the paste lost the numbers)"]
        out += ["", s.head("Why it failed")]
        parts = [
            (f.allocated_bytes, "allocated"),
            (f.other_bytes, "other"),
            (f.requested_bytes, "requested"),
        ]
        known = [(v, n) for v, n in parts if v is not None]
        need = sum(v for v, _ in known)
        cap = f.max_allowed_bytes
        if known and cap is not None:
            terms = " + ".join(self.size(v, f) for v, _ in known)
            over = need - cap
            slack = sum(
                f.rounding.get(k, 0)
                for k in ("allocated_bytes", "other_bytes", "requested_bytes", "max_allowed_bytes")
            )
            if over > slack:
                out.append(
                    f"  {terms} = {self.size(need, f)}, over the {self.size(cap, f)} cap "
                    f"by {self.size(over, f)}."
                )
            elif over >= -slack:
                out.append(
                    f"  {terms} = {self.size(need, f)}: at the {self.size(cap, f)} cap "
                    "(each number is rounded to 2 decimals, so the last allocation tipped it)."
                )
            else:
                out.append(
                    f"  {terms} = {self.size(need, f)}, under the {self.size(cap, f)} cap: "
                    "the numbers do not add up (see the note below)."
                )
            if len(known) < 3:
                out.append("  (the paste lost some numbers: the sum is only what it kept)")
        elif cap is None:
            out.append('  No "max allowed" in the message: no cap was in force (ratio 0.0, or a')
            out.append("  PyTorch before 2.0), so the job stopped only when Metal itself ran out.")
        else:
            out.append(f"  PyTorch needed more than the {self.size(cap, f)} cap allows.")
        out += self.mps_notes(f)
        out += ["", s.head("The ratio in force")]
        out += self.ratio_lines(f)
        out += ["", s.head("Fix")]
        out += self.fix_lines(self.fit_hint(f, need if known else None))
        return out

    def mps_notes(self, f: Finding) -> list[str]:
        notes: list[str] = []
        cap, alloc, other, req = (
            f.max_allowed_bytes,
            f.allocated_bytes,
            f.other_bytes,
            f.requested_bytes,
        )
        if other is not None and other > macs.LARGEST_MAC:
            notes.append(
                f'"other allocations" of {self.size(other, f)} is more memory than any '
                "Mac has: the number is bogus (an accounting bug of that PyTorch/macOS "
                "version, usually), not memory really in use."
            )
        if (
            cap is not None
            and alloc is not None
            and alloc > cap + f.rounding.get("max_allowed_bytes", 0)
        ):
            notes.append(
                '"MPS allocated" is above the cap. That happens when the cap was lowered '
                "after the memory was allocated (torch.mps.set_per_process_memory_fraction, "
                "or a library calling it), so the next allocation fails at once."
            )
        if (
            cap is not None
            and alloc is not None
            and other is not None
            and alloc <= cap * 0.05
            and other >= cap * 0.5
        ):
            notes.append(
                'PyTorch\'s tensors hold almost nothing: "other allocations" fill the cap. '
                "That memory is outside PyTorch's allocator (Metal buffers of other "
                "libraries in the process, MPSGraph caches, memory freed but not yet "
                "returned); with many workers in one process each one's share adds up."
            )
        elif other is not None and alloc is not None and other > alloc and other > (cap or 0) * 0.3:
            notes.append(
                '"other allocations" exceed what PyTorch\'s tensors hold: much of the '
                "memory is outside PyTorch's allocator (other libraries' Metal buffers, "
                "MPSGraph caches). torch.mps.empty_cache() between steps can help."
            )
        if cap is not None and req is not None and req > cap:
            notes.append(
                f"One allocation of {self.size(req, f)} is larger than the whole cap: "
                "no batch fits, shrink the step (batch size, resolution, tiling)."
            )
        s = self.style
        return [f"  {s.warn('Note:')} {n}" for n in notes]

    def ratio_lines(self, f: Finding) -> list[str]:
        cap = f.max_allowed_bytes
        if cap is None:
            return ['  Unknown: the message has no "max allowed".']
        lim = self.limits
        if lim is not None:
            ratio = cap / lim.recommended_max_bytes
            line = (
                f"  {self.size(cap, f)} = {ratio:.2f} x {self.size(lim.recommended_max_bytes, f)} "
                "(this Mac's recommended maximum, from limits.toml)"
            )
            out = [line]
            if abs(ratio - macs.DEFAULT_HIGH) < 0.01:
                out.append(f"  That is {macs.DEFAULT_NOTE}: {HIGH} was not set for this job.")
            elif abs(ratio - lim.high_watermark_ratio) < 0.01:
                out.append("  That is mpsd's value: the job ran with mpsd's variables.")
            else:
                out.append(
                    f"  mpsd's value now is {_ratio(lim.high_watermark_ratio)}: this job ran "
                    "with another (set by hand, or before mpsd's last update)."
                )
            if cap > lim.baseline_free_bytes:
                out.append(
                    f"  The cap is above the {format_size(lim.baseline_free_bytes)} usually "
                    "free on this Mac: macOS swaps before PyTorch stops the job."
                )
            return out
        guesses = macs.guesses(cap)
        smallest = min(ws for _, ws in macs.WORKING_SETS)
        if not guesses and cap < smallest * 0.75:
            return [
                f"  {self.size(cap, f)} is far below any Mac's recommended maximum: a small "
                "ratio or memory fraction was set for this job (by you, or by the app)."
            ]
        if not guesses:
            return [
                f"  {self.size(cap, f)} matches no common Mac with a round ratio. If PyTorch's "
                f"default {macs.DEFAULT_HIGH} was in force, this Mac's recommended maximum is "
                f"{self.size(cap / macs.DEFAULT_HIGH, f)}."
            ]
        out = []
        for i, g in enumerate(guesses):
            what = (
                f"the default ratio on {_mac(g.ram_gb)}"
                if g.is_default
                else f"a ratio of {_ratio(g.ratio)} on {_mac(g.ram_gb)}"
            )
            lead = f"{self.size(cap, f)} =" if i == 0 else "   or"
            out.append(f"  {lead} {_ratio(g.ratio)} x {self.size(g.working_set, f)}: {what}")
        best = guesses[0]
        ram = best.ram_gb * macs.GIB
        if best.is_default and cap > ram * 0.9:
            much = "more than" if cap > ram else "about all of"
            out.append(
                f"  A cap of {self.size(cap, f)} on {_mac(best.ram_gb)} is {much} its "
                "memory: macOS swaps long before PyTorch stops the job."
            )
        out.append(
            "  (`mpsd install` reads this Mac's recommended maximum, so `mpsd explain` can say "
            "for sure.)"
        )
        return out

    def fit_hint(self, f: Finding, need: int | None) -> str:
        if need is None:
            return ""
        if self.limits is not None:
            safe, where = self.limits.limit_bytes, "on this Mac"
        else:
            guesses = macs.guesses(f.max_allowed_bytes or 0)
            if not guesses:
                return ""
            safe = round(macs.FALLBACK_RATIO * guesses[0].working_set)
            where = f"on {_mac(guesses[0].ram_gb)}"
        cap = format_size(safe, f.binary_units)
        if need <= safe:
            return (
                f"At that value the cap is {cap} {where}: enough for the {self.size(need, f)} "
                "this job had reached."
            )
        return (
            f"At that value the cap is {cap} {where}, and this job needed {self.size(need, f)}: "
            "make it use less memory too (smaller batch or resolution, float16, one model at a "
            "time, tiling)."
        )

    # --- watermark errors -----------------------------------------------------------
    def watermark(self, f: Finding) -> list[str]:
        s = self.style
        shown = _ratio(f.ratio) if f.ratio is not None else "?"
        out: list[str] = []
        if f.kind == fk.MPS_INVALID_LOW:
            out.append(
                f"  PyTorch refused the low watermark ratio {shown}: LOW must be between 0 and "
                "HIGH."
            )
            if f.ratio is not None and abs(f.ratio - macs.DEFAULT_LOW) < 1e-9:
                out.append(
                    f"  {shown} is LOW's default: {HIGH} was set below 1.4 and {LOW} was "
                    "left unset."
                )
            out.append(
                "  It is a setting, not a lack of memory: it fails at the first MPS use, "
                "whatever is free."
            )
        else:
            out.append(
                f"  PyTorch refused the high watermark ratio {shown}: HIGH must be between 0 and 2."
            )
            out.append("  It is a setting, not a lack of memory.")
        out += ["", s.head("Fix")]
        out += self.fix_lines("")
        return out

    # --- other errors ---------------------------------------------------------------
    OTHER: ClassVar[dict[str, str]] = {
        "invalid_buffer_size": (
            "One tensor is larger than the largest buffer Metal allows on this Mac "
            "(its maxBufferLength). No watermark ratio changes this: split the work "
            "(smaller batch, lower resolution, tiled VAE decoding, chunked attention)."
        ),
        "ndarray_too_large": (
            "An MPS kernel got a tensor of more than 4 GiB (2**32 bytes), more than "
            "MPSNDArray takes on this macOS. Not a lack of memory: no ratio changes it. "
            "Split the work (smaller batch or tiles), update macOS and PyTorch, or run that step "
            "on the CPU."
        ),
        "dimension_too_large": (
            "A tensor dimension (or the product of dimensions) is above 2**31, beyond what "
            "Metal's kernels index. Not a lack of memory: split the tensor into chunks, or "
            "run that step on the CPU."
        ),
        "command_buffer_oom": (
            "Metal itself ran out of memory while running a GPU command: the system had no "
            "memory left for it (other apps, or a cap above what is really free). Lower the "
            "ratio so PyTorch stops first, with a clean error."
        ),
        "internal_assert": (
            "PyTorch's MPS allocator failed an internal check of its watermarks: the ratio "
            "variables are inconsistent. Set both, to the same plain decimal."
        ),
    }

    def mps_other(self, f: Finding) -> list[str]:
        out = []
        if f.requested_bytes is not None:
            out += _table(
                [
                    (
                        "buffer size",
                        self.size(f.requested_bytes, f),
                        "the one tensor Metal was asked for",
                    )
                ],
                self.style,
            )
        out.append(f"  {self.OTHER.get(f.detail, 'An MPS memory error.')}")
        if f.detail in ("command_buffer_oom", "internal_assert"):
            out += ["", self.style.head("Fix"), *self.fix_lines("")]
        return out

    def cuda(self, f: Finding) -> list[str]:
        rows: list[tuple[str, str, str]] = []
        add = rows.append
        if f.requested_bytes is not None:
            add(("requested", self.size(f.requested_bytes, f), "the allocation that failed"))
        if f.total_bytes is not None:
            add(("total", self.size(f.total_bytes, f), "the GPU's memory"))
        if f.free_bytes is not None:
            add(("free", self.size(f.free_bytes, f), "free on the GPU at that moment"))
        if f.allocated_bytes is not None:
            add(("allocated", self.size(f.allocated_bytes, f), "held by PyTorch's tensors"))
        if f.reserved_bytes is not None:
            add(
                (
                    "reserved",
                    self.size(f.reserved_bytes, f),
                    "PyTorch's total: tensors + its cache of freed blocks",
                )
            )
        if f.in_use_bytes is not None:
            add(("in use", self.size(f.in_use_bytes, f), "this process's total, PyTorch or not"))
        if f.allowed_bytes is not None:
            add(("allowed", self.size(f.allowed_bytes, f), "set_per_process_memory_fraction's cap"))
        out = _table(rows, self.style) if rows else []
        notes: list[str] = []
        if f.detail in ("runtime", "library_alloc_failed"):
            notes.append(
                "The CUDA driver (or a CUDA library) could not allocate: the GPU was full, "
                "maybe by another process. Errors are reported late, so the line in the "
                "traceback may not be the culprit (CUDA_LAUNCH_BLOCKING=1 finds it)."
            )
        total, alloc, res, free = f.total_bytes, f.allocated_bytes, f.reserved_bytes, f.free_bytes
        if total is not None and alloc is not None and alloc > total:
            notes.append(
                "PyTorch holds more than the GPU has: on Windows the driver spills into "
                'system RAM ("CUDA sysmem fallback"), which is slow.'
            )
        if total is not None and f.requested_bytes is not None and f.requested_bytes > total:
            notes.append("One allocation is larger than the whole GPU: shrink the step itself.")
        elif free is not None and f.requested_bytes is not None and free >= f.requested_bytes:
            notes.append(
                "More was free than requested: the free memory was fragmented or taken "
                "by the time PyTorch asked (another process, or a memory-fraction cap)."
            )
        if (
            total is not None
            and res is not None
            and free is not None
            and res < total * 0.5
            and free < total * 0.1
        ):
            notes.append(
                "PyTorch holds little of the GPU, yet it is full: other processes "
                "(or the desktop) use it; check nvidia-smi."
            )
        if alloc is not None and res is not None and res - alloc > max(alloc * 0.25, 1 << 30):
            notes.append(
                "Much is reserved but unused (fragmentation): try "
                "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True."
            )
        out += [f"  {self.style.warn('Note:')} {n}" for n in notes]
        out.append(
            "  Usual fixes: a smaller batch or resolution, float16/bfloat16, gradient "
            "checkpointing, offloading (lowvram modes), freeing other GPU users."
        )
        return out

    def cpu(self, f: Finding) -> list[str]:
        out = []
        if f.requested_bytes is not None:
            out += _table(
                [
                    (
                        "requested",
                        self.size(f.requested_bytes, f),
                        "the allocation of main memory that failed",
                    )
                ],
                self.style,
            )
            if f.requested_bytes > macs.LARGEST_MAC:
                out.append(
                    f"  {self.style.warn('Note:')} more than any computer's memory: a wrong "
                    "shape or size, most likely."
                )
        out.append(
            "  The process ran out of main memory (RAM and swap, or the Windows page file). "
            "Use less (smaller batch, float16, load one model at a time), close other apps, "
            "or give the system more swap/page file."
        )
        return out

    # --- all ------------------------------------------------------------------------
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


def _wrap(line: str) -> list[str]:
    """Long prose lines wrapped at WIDTH, at spaces, continuing at their indent (plus the
    width of a leading "Note: ")."""
    if len(line) <= WIDTH:
        return [line]
    indent = " " * (len(line) - len(line.lstrip(" ")))
    more = indent + ("      " if "Note:" in line[: len(indent) + 15] else "")
    out: list[str] = []
    current = indent
    for word in line.split():
        if current.strip() and len(current) + 1 + len(word) > WIDTH:
            out.append(current)
            current = more
        current += word if not current.strip() else " " + word
    out.append(current)
    return out


MAX_SHOWN = 20  # a log with more distinct errors is summed up after these


def render(findings: list[Finding], limits: Limits | None = None, color: bool = False) -> str:
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
