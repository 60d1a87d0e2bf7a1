"""The explanation of CUDA/HIP and CPU out-of-memory errors: the numbers, the usual fixes."""

from __future__ import annotations

from mpsd.oom import macs
from mpsd.oom.finding import Finding
from mpsd.oom.render_base import Base, table


class OtherText(Base):
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
        out = [*table(rows, self.style), *self.units_note(f)] if rows else []
        notes: list[str] = []
        if f.detail in ("runtime", "library_alloc_failed"):
            notes.append(
                "The CUDA driver (or a CUDA library) could not allocate: the GPU was full, "
                "maybe by another process. Errors are reported late, so the line in the "
                "traceback may not be the culprit (CUDA_LAUNCH_BLOCKING=1 finds it)."
            )
        total, alloc, res = f.total_bytes, f.allocated_bytes, f.reserved_bytes
        if total is not None and alloc is not None and alloc > total:
            notes.append(
                "PyTorch holds more than the GPU has: on Windows the driver spills into "
                'system RAM ("CUDA sysmem fallback"), which is slow.'
            )
        free = f.free_bytes
        busy = total is not None and free is not None and free < total * 0.1
        if busy and total is not None and res is not None and res < total * 0.5:
            notes.append(
                "PyTorch holds little of the GPU, yet it is full: other processes "
                "(or the desktop) use it; check nvidia-smi."
            )
        why = self.cuda_why(f)
        if why or notes:
            out += ["", self.style.head("Why it failed"), *why]
            out += [f"  {self.style.warn('Note:')} {n}" for n in notes]
        out += ["", self.style.head("Fix"), *self.cuda_fix(f)]
        return out

    def cuda_why(self, f: Finding) -> list[str]:
        """The request against what was free on the GPU and what PyTorch held in reserve
        without using it (its cache): which of the two was short."""
        req, free, total = f.requested_bytes, f.free_bytes, f.total_bytes
        unused = self.unallocated(f)
        size = self.size
        if req is None:
            return []
        if total is not None and req > total:
            return [
                f"  One allocation of {size(req)} is more than the whole GPU ({size(total)}): "
                "a tensor's shape or the batch is the problem first."
            ]
        out: list[str] = []
        if free is None:
            out.append(f"  PyTorch asked for {size(req)}; the message does not say what was free.")
        elif free >= req:
            out.append(
                f"  PyTorch asked for {size(req)} while {size(free)} was free: the free memory "
                "was in pieces, or taken by the time PyTorch asked (another process, or a "
                "memory-fraction cap)."
            )
        else:
            out.append(
                f"  PyTorch asked for {size(req)}; only {size(free)} was free on the GPU, "
                f"{size(req - free)} short."
            )
        if unused is not None and free is not None and free < req:
            if unused + free >= req:
                out.append(
                    f"  PyTorch also held {size(unused)} reserved but unallocated (its cache of "
                    f"freed blocks): with the free memory, {size(free + unused)}, enough for the "
                    "request, but not in one piece. That is fragmentation."
                )
            else:
                out.append(
                    f"  PyTorch also held {size(unused)} reserved but unallocated (its cache): "
                    f"free and cached together, {size(free + unused)}, are less than the "
                    "request. The job needs less memory, or the GPU's other users must free "
                    "theirs."
                )
        elif unused is not None:
            out.append(f"  PyTorch held {size(unused)} reserved but unallocated (its cache).")
        return out

    @staticmethod
    def unallocated(f: Finding) -> int | None:
        """PyTorch's reserved memory that no tensor used (its cache of freed blocks)."""
        if f.reserved_bytes is None or f.allocated_bytes is None:
            return None
        return max(0, f.reserved_bytes - f.allocated_bytes)

    def cuda_fix(self, f: Finding) -> list[str]:
        """The allocator setting the message names (or, when much is reserved but unused,
        the one to try), whether it can make room here, and the usual fixes."""
        out: list[str] = []
        unused, free, req = self.unallocated(f), f.free_bytes, f.requested_bytes
        fragmented = unused is not None and unused > max((f.allocated_bytes or 0) * 0.25, 1 << 30)
        here = ""
        if unused is not None and free is not None and req is not None and free < req:
            if free + unused >= req:
                here = (
                    " Here it may be the whole fix: the free and the cached memory together "
                    "would hold the request."
                )
            else:
                here = (
                    " Here it cannot make room enough: the free and the cached memory together "
                    "are less than the request."
                )
        cmd = self.style.cmd
        if f.alloc_conf == "expandable_segments" or (fragmented and f.alloc_conf is None):
            lead = "The message suggests" if f.alloc_conf else "Try"
            out.append(
                f"  {lead} {cmd('export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True')} "
                "(before python starts): the allocator then grows its segments instead of "
                f"leaving cached pieces too small to reuse.{here}"
            )
        elif f.alloc_conf == "max_split_size_mb":
            out.append(
                "  The message suggests max_split_size_mb: "
                f"{cmd('export PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:128')} (before python "
                "starts; 128 is an example) keeps cached blocks larger than that from being "
                "split, so a large request finds room. On PyTorch 2.1 and later "
                f"expandable_segments:True usually does better.{here}"
            )
        out.append(
            "  Usual fixes: a smaller batch or resolution, float16/bfloat16, gradient "
            "checkpointing, offloading (lowvram modes), freeing other GPU users."
        )
        return out

    def cpu(self, f: Finding) -> list[str]:
        out = []
        if f.requested_bytes is not None:
            out += table(
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
