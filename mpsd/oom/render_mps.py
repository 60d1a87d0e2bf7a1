"""The explanation of MPS errors: out of memory, the watermark ratios, Metal's limits."""

from __future__ import annotations

from typing import ClassVar

from mpsd.oom import finding as fk
from mpsd.oom import macs
from mpsd.oom.finding import Finding
from mpsd.oom.known import Known
from mpsd.oom.render_base import HIGH, LOW, Base, mac_name, ratio_text, table
from mpsd.oom.units import format_size


class MpsText(Base):
    def mps_oom(self, f: Finding) -> list[str]:
        s = self.style
        rows: list[tuple[str, str, str]] = []
        if f.allocated_bytes is not None:
            rows.append(
                (
                    "MPS allocated",
                    self.size(f.allocated_bytes, f),
                    "PyTorch's MPS allocator: Metal heaps, cache included",
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
        out = [*table(rows, s), *self.units_note(f)] if rows else ["  (the paste lost the numbers)"]
        out += ["", s.head("Why it failed")]
        parts = [
            (f.allocated_bytes, "allocated"),
            (f.other_bytes, "other"),
            (f.requested_bytes, "requested"),
        ]
        known = [(v, n) for v, n in parts if v is not None]
        need = sum(v for v, _ in known)
        cap = f.max_allowed_bytes
        too_big = cap is not None and f.requested_bytes is not None and f.requested_bytes > cap
        if too_big:
            assert cap is not None and f.requested_bytes is not None
            out.append(
                f"  The request alone, {self.size(f.requested_bytes)}, is more than the whole "
                f"{self.size(cap)} cap: a tensor's shape or the batch is the problem first."
            )
        short = False
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
            elif len(known) < 3:
                out.append(f"  {terms} = {self.size(need, f)}, with the {self.size(cap, f)} cap.")
            else:
                short = True
                out.append(
                    f"  {terms} = {self.size(need, f)}, under the {self.size(cap, f)} cap: "
                    "the numbers do not add up (see the note below)."
                )
            if len(known) < 3:
                out.append("  (the paste lost some numbers: the sum is only what it kept)")
        elif cap is None and f.requested_bytes is None:
            out.append('  The paste ends before "max allowed": the cap in force is unknown.')
        elif cap is None:
            out.append('  No "max allowed" in the message: no cap was in force (ratio 0.0, or a')
            out.append("  PyTorch before 2.0), so the job stopped only when Metal itself ran out.")
        else:
            out.append(f"  PyTorch needed more than the {self.size(cap, f)} cap allows.")
        out += self.mps_notes(f, short)
        out += ["", s.head("The ratio in force")]
        out += self.ratio_lines(f)
        out += ["", s.head("Fix")]
        first = ""
        if too_big:
            assert f.requested_bytes is not None
            first = (
                f"First make the step smaller: one allocation of {self.size(f.requested_bytes)} "
                "needs a smaller batch, resolution or tile, or float16; a ratio alone will not "
                "make room for it."
            )
        hint = "" if too_big else self.fit_hint(f, need if known else None)
        out += self.fix_lines(hint, first)
        return out

    def mps_notes(self, f: Finding, short: bool = False) -> list[str]:
        notes: list[str] = []
        cap, alloc, other = f.max_allowed_bytes, f.allocated_bytes, f.other_bytes
        if short:
            notes.append(
                "PyTorch does not check the printed numbers against the cap: it adds the "
                "request's aligned size (rounded up to the allocator's block size) to the "
                "driver's whole allocation for the process, and both can be larger than what "
                "the message prints. So the printed numbers can fall short of the cap."
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
                'PyTorch\'s allocator holds almost nothing: "other allocations" fill the cap. '
                "That memory is outside PyTorch's allocator (Metal buffers of other "
                "libraries in the process, MPSGraph caches, memory freed but not yet "
                "returned); with many workers in one process each one's share adds up."
            )
        elif other is not None and alloc is not None and other > alloc and other > (cap or 0) * 0.3:
            notes.append(
                '"other allocations" exceed what PyTorch\'s allocator holds: much of the '
                "memory is outside it (other libraries' Metal buffers, MPSGraph caches)."
            )
        s = self.style
        return [f"  {s.warn('Note:')} {n}" for n in notes]

    def ratio_lines(self, f: Finding) -> list[str]:
        cap = f.max_allowed_bytes
        if cap is None:
            return ['  Unknown: the message has no "max allowed".']
        slack = f.rounding.get("max_allowed_bytes", 0)
        if self.limits is not None:
            return self.ratio_against(f, cap, slack, self.limits)
        guesses = macs.guesses(cap, slack)
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
                f"the default ratio on {mac_name(g.ram_gb)}"
                if g.is_default
                else f"a ratio of {ratio_text(g.ratio)} on {mac_name(g.ram_gb)}"
            )
            lead = f"{self.size(cap, f)} =" if i == 0 else "   or"
            out.append(f"  {lead} {ratio_text(g.ratio)} x {self.size(g.working_set, f)}: {what}")
        best = guesses[0]
        ram = best.ram_gb * macs.GIB
        if best.is_default and cap > ram * 0.9:
            much = "more than" if cap > ram else "about all of"
            out.append(
                f"  A cap of {self.size(cap, f)} on {mac_name(best.ram_gb)} is {much} its "
                "memory: macOS swaps long before PyTorch stops the job."
            )
        out.append(
            "  (`mpsd install` reads this Mac's recommended maximum, so `mpsd explain` can say "
            "for sure.)"
        )
        return out

    def ratio_against(self, f: Finding, cap: int, slack: int, lim: Known) -> list[str]:
        """The ratio in force, read against this Mac's recommended max from limits.toml.

        The cap is ratio x recommended max (``macs.gives``: within the printed cap's
        rounding), so "cap = r x max" is printed only for a ratio that gives the cap, and "mpsd's
        value" said only when mpsd's ratio does. Where the max is an estimate, the ratio is
        only "about" (the real max is lower: the estimate errs high)."""
        rm, high = lim.recommended_max_bytes, lim.high_watermark_ratio
        shown_cap, shown_max = self.size(cap, f), self.size(rm, f)
        is_default = macs.gives(macs.DEFAULT_HIGH, rm, cap, slack)
        is_mpsd = macs.gives(high, rm, cap, slack)
        found: tuple[float, int] | None = None
        if is_default:
            found = (macs.DEFAULT_HIGH, 2)
        elif is_mpsd:
            found = (high, macs.decimals_of(high))
        elif not lim.estimated:
            found = macs.ratio_behind(cap, slack, rm)
        if lim.estimated:
            whose = (
                "mpsd's estimate of this Mac's recommended maximum, from its RAM: Metal's own "
                "figure could not be read"
            )
        else:
            whose = "this Mac's recommended maximum, from limits.toml"
        if found is not None:
            ratio, decimals = found
            out = [f"  {shown_cap} = {ratio:.{decimals}f} x {shown_max} ({whose})"]
        else:
            about = f"{cap / rm:.2f}"
            out = [f"  {shown_cap} is about {about} x {shown_max} ({whose})."]
            if lim.estimated:
                out.append(
                    f"  The estimate errs high, so the ratio in force was about {about} or more."
                )
        mpsd = ratio_text(high)
        if is_default:
            out.append(f"  That is {macs.DEFAULT_NOTE}: {HIGH} was not set for this job.")
        elif is_mpsd:
            out.append("  That is mpsd's value: the job ran with mpsd's variables.")
        elif lim.estimated and cap > macs.cap_of(high, rm) + slack:
            out.append(
                f"  mpsd's value now is {mpsd}, a cap of at most "
                f"{self.size(macs.cap_of(high, rm), f)} (the estimate errs high): this job ran "
                "with a higher ratio (set by hand, or before mpsd's last update)."
            )
        elif lim.estimated:
            out.append(
                f"  mpsd's value now is {mpsd}. With an estimated maximum, mpsd cannot tell "
                f"whether this job ran with it: it did if this Mac's real maximum is about "
                f"{self.size(cap / high, f)}."
            )
        elif found is not None and found[1] == 2:
            out.append(
                f"  mpsd's value now is {mpsd}: this job ran with another (set by hand, or "
                "before mpsd's last update)."
            )
        else:
            out.append(
                f"  No ratio of two decimals gives this cap on this Mac, so it is not mpsd's "
                f"value ({mpsd}). The program (or a library) may have set a memory fraction, "
                "torch.mps.set_per_process_memory_fraction, or the job ran with another "
                "recommended maximum (another Mac, or another macOS)."
            )
        if cap > lim.baseline_free_bytes:
            out.append(
                f"  The cap is above the {format_size(lim.baseline_free_bytes)} usually "
                "free on this Mac: macOS swaps before PyTorch stops the job."
            )
        return out

    def fit_hint(self, f: Finding, need: int | None) -> str:
        """Whether the value in the fix makes room for this job. The job failed at the cap
        in force, so it needed more than that cap, whatever the printed numbers add up to:
        a cap is never said to be "enough", only above or below what the job needed."""
        if need is None:
            return ""
        cap = f.max_allowed_bytes
        slack = f.rounding.get("max_allowed_bytes", 0)
        lim = self.limits
        less = "smaller batch or resolution, float16, one model at a time, tiling"
        if lim is not None:
            high, rm = lim.high_watermark_ratio, lim.recommended_max_bytes
            if cap is not None and macs.gives(high, rm, cap, slack):
                return f"That is the cap this job failed at: make the job use less memory ({less})."
            safe, where = macs.cap_of(high, rm), ""
        else:
            guesses = macs.guesses(cap or 0, slack)
            if not guesses:
                return ""
            safe = round(macs.FALLBACK_RATIO * guesses[0].working_set)
            where = f"on {mac_name(guesses[0].ram_gb)}"
        # With limits.toml the line above has already given the cap.
        if lim is None:
            lead = f"At that value the cap is {format_size(safe)} {where},"
        elif lim.estimated:
            lead = "By mpsd's estimate, that cap is"
        else:
            lead = "That cap is"
        floor = max(need, cap or 0)  # what the job needed, at least
        if safe <= floor:
            return (
                f"{lead} less than the {self.size(floor)} this job needed: make it use less "
                f"memory too ({less})."
            )
        if cap is None:
            return (
                f"{lead} above the {self.size(need)} the message shows, but with no cap the "
                "job ran until Metal ran out: it may need more than that."
            )
        hint = (
            f"{lead} above the {self.size(cap)} cap this job failed at: it fits if it needed "
            f"less than {self.size(safe - cap)} more than that (the message does not say)."
        )
        if lim is not None and lim.estimated:
            hint += " If the job already ran with mpsd's value, the real cap is the same one."
        return hint

    # --- watermark errors -----------------------------------------------------------
    def watermark(self, f: Finding) -> list[str]:
        s = self.style
        shown = ratio_text(f.ratio) if f.ratio is not None else "?"
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
                f"  To keep the HIGH you chose, set LOW to the same value: {HIGH}=X {LOW}=X."
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
        out.append(
            "  Then restart the Python process (the notebook's kernel too): PyTorch keeps the "
            "values it read, so changing os.environ in the process that failed does nothing."
        )
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
            out += table(
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
