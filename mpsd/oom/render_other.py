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
        out = table(rows, self.style) if rows else []
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
