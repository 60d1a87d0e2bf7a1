"""The readers: what each known error looks like, and how its numbers are read.

Every pattern works on the squeezed text of ``normalize`` (lower case, no spaces,
no quotes), where a wrap at any column, colour codes, prefixes and quoting have
gone. A reader is a *head*, a short phrase where an error starts, and an extractor
that reads the error's numbers from the text after it, up to the next head.

The extractors are written for the families, not for particular pastes: every
size after the head is labelled by the words around it (``labels``), so the numbers
of a truncated paste, of an older or newer wording, in any order, with a log line
glued in the middle, are all read.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Optional

from mpsd.oom import finding as fk
from mpsd.oom.finding import Finding
from mpsd.oom.labels import SIZE, Labels, read_sizes
from mpsd.oom.normalize import compiled
from mpsd.oom.scan import find_phrase

Extract = Callable[[str], Optional[Finding]]  # not `Finding | None`: evaluated at run time on 3.9


class Head:
    """Where an error starts: ``phrase`` (squeezed, matched even with a letter lost),
    with the regex ``before`` just before it and ``after`` just after it, when given;
    or, for a head with no phrase, the regex ``pattern`` (it must start with a
    literal, so that it is a fast search).

    A head with ``lookback`` is a phrase from inside a message (a paste that lost the
    message's start): it is ignored less than ``lookback`` characters after another
    head, where it is only the rest of that message."""

    __slots__ = ("after", "before", "extract", "lookback", "max_len", "name", "pattern", "phrase")

    def __init__(
        self,
        name: str,
        phrase: str,
        extract: Extract,
        max_len: int,
        *,
        lookback: int = 0,
        before: str = "",
        after: str = "",
        pattern: str = "",
    ) -> None:
        self.name = name
        self.phrase = "".join(phrase.split()).lower().replace("'", "")
        self.extract = extract
        self.max_len = max_len
        self.lookback = lookback
        self.before = before
        self.after = after
        self.pattern = pattern


# --- MPS out of memory -------------------------------------------------------------
MPS_LABELS: Labels = {
    "allocated_bytes": (("mpsallocated", "currentlyallocated"), ()),
    "other_bytes": (("otherallocations",), ()),
    "max_allowed_bytes": (("maxallowed",), ()),
    "requested_bytes": (("triedtoallocate",), ()),
}


def _mps_oom(seg: str) -> Finding:
    found = Finding(fk.MPS_OOM, "oom")
    read_sizes(seg, MPS_LABELS, found)
    pools = [
        (span[0], name)
        for name in ("private", "shared")
        for span in find_phrase(seg, f"on{name}pool")
    ]
    if pools:
        found.pool = min(pools)[1]
    return found


# --- MPS watermark errors ----------------------------------------------------------
_RATIO = r"[a-z]*[:=~]?(-?(?:\d+(?:\.\d*)?|\.\d+)(?:e[-+]?\d+)?|-?nan|-?inf)"


def _watermark(kind: str) -> Extract:
    def extract(seg: str) -> Finding:
        found = Finding(kind, "invalid_ratio")
        m = compiled(_RATIO).match(seg, seg.find("water") + 5 if "water" in seg[:20] else 12)
        if m:
            found.ratio = float(m.group(1))
        return found

    return extract


# --- other MPS errors ------------------------------------------------------------
BUFFER_LABELS: Labels = {"requested_bytes": (("buffersize",), ())}


def _mps_other(detail: str) -> Extract:
    def extract(seg: str) -> Finding:
        found = Finding(fk.MPS_OTHER, detail)
        if detail == "invalid_buffer_size":
            read_sizes(seg[:40], BUFFER_LABELS, found)
        return found

    return extract


def _mps_assert(seg: str) -> Finding | None:
    near = seg[:600]
    if "watermark" in near or "mpsallocator" in near:
        return Finding(fk.MPS_OTHER, "internal_assert")
    return None


# --- CUDA / HIP --------------------------------------------------------------------
CUDA_LABELS: Labels = {
    "requested_bytes": (("triedtoallocate", "requested"), ()),
    # "capacty": PyTorch's own typo in some versions, so one more lost letter is two.
    "total_bytes": (
        ("totalcapacityof", "totalcapactyof", "devicelimit"),
        ("totalcapacity", "totalcapacty"),
    ),
    "free_bytes": (("ofwhich", "accordingtocuda"), ("free", "isfree", "fre", "fee", "ree")),
    "allocated_bytes": (
        ("oftheallocatedmemory", "currentlyallocated"),
        ("alreadyallocated", "isallocatedbypytorch"),
    ),
    "_unallocated": ((), ("isreservedbypytorchbutunallocated",)),
    "reserved_bytes": ((), ("reservedintotalbypytorch", "cached")),
    "in_use_bytes": (("thisprocesshas",), ("memoryinuse",)),
    "allowed_bytes": ((), ("allowed",)),
}
_DEVICE = r"(?:gpu|gp|gu|pu|device)~?(\d{1,3})(?![\d.,])"  # "GPU 0", a letter lost or not
_BACKEND = r"cuda|hip|xpu"


def _cuda(detail: str) -> Extract:
    def extract(seg: str) -> Finding:
        found = Finding(fk.CUDA_OOM, detail)
        backend = compiled(_BACKEND).search(seg[:40])
        found.backend = backend.group() if backend else "cuda"
        if detail in ("oom", "allocation_on_device"):
            extra = read_sizes(seg, CUDA_LABELS, found)
            device = compiled(_DEVICE).search(seg)
            if device:
                found.device = int(device.group(1))
            unallocated = extra.get("_unallocated")
            if (
                found.reserved_bytes is None
                and unallocated is not None
                and found.allocated_bytes is not None
            ):
                # The newer wording splits PyTorch's reserved memory in two.
                found.reserved_bytes = found.allocated_bytes + unallocated
            for setting in ("expandable_segments", "max_split_size_mb"):
                if setting in seg:
                    found.alloc_conf = setting
                    break
        return found

    return extract


# --- CPU allocator -----------------------------------------------------------------
CPU_LABELS: Labels = {"requested_bytes": (("youtriedtoallocate", "unabletoallocate"), ())}


def _cpu(detail: str) -> Extract:
    def extract(seg: str) -> Finding:
        found = Finding(fk.CPU_OOM, detail)
        if detail in ("cpu_allocator", "numpy"):
            read_sizes(seg, CPU_LABELS, found)
        return found

    return extract


_GPU = "(?:cuda|hip|xpu)"
HEADS: tuple[Head, ...] = (
    Head("mps_oom", "mps backend out", _mps_oom, 900),
    Head("mps_part", "mps allocated", _mps_oom, 900, lookback=120, after=r":?\d"),
    Head("wm_low", "invalid low water", _watermark(fk.MPS_INVALID_LOW), 60),
    Head("wm_high", "invalid high water", _watermark(fk.MPS_INVALID_HIGH), 60),
    Head("buffer", "invalid buffer size", _mps_other("invalid_buffer_size"), 80),
    Head("ndarray", "bytes of ndarray", _mps_other("ndarray_too_large"), 60),
    Head("ndarray_dims", "ndarray dimension", _mps_other("dimension_too_large"), 60),
    Head("tensor_dims", "tensor dims larger", _mps_other("dimension_too_large"), 60),
    Head("product", "product of dimension", _mps_other("dimension_too_large"), 60),
    Head("cmdbuf", "callback error out of", _mps_other("command_buffer_oom"), 60, lookback=60),
    Head("cmdbuf2", "insufficient memory", _mps_other("command_buffer_oom"), 60, after=r"\(0*8"),
    Head("assert", "internal assert", _mps_assert, 600),
    Head("cuda_error", "cuda error: out of mem", _cuda("runtime"), 60),
    Head("hip_error", "hip error: out of mem", _cuda("runtime"), 60),
    Head(  # 0.x-1.x: "cuda runtime error (2) : out of memory"
        "cuda_runtime",
        "cuda runtime err",
        _cuda("runtime"),
        60,
        after=r"(?:or)?(?:\(\d+\))?:?[a-z]{3,5}m?e?m",  # "out of memory", a letter lost or not
    ),
    Head("cuda_oom", "cuda out of mem", _cuda("oom"), 1400),
    Head("hip_oom", "hip out of mem", _cuda("oom"), 1400),
    Head("xpu_oom", "xpu out of mem", _cuda("oom"), 1400),
    Head(
        "cuda_part",
        "tried to allocate",
        _cuda("oom"),
        1400,
        lookback=100,
        after=SIZE + r"[.(]*(?:gpu|gp|gu|pu)~?\d",
    ),
    Head("cuda_enum", "", _cuda("runtime"), 60, pattern=r"cudaerrormemoryallocation"),
    Head("hip_enum", "", _cuda("runtime"), 60, pattern=r"hiperroroutofmemory"),
    Head("cuda_lib", "", _cuda("library_alloc_failed"), 60, pattern=r"status_?alloc_?failed"),
    Head("aod", "allocation on device", _cuda("allocation_on_device"), 700),
    Head("cpu", "default cpu allocator", _cpu("cpu_allocator"), 400),
    Head(
        "cpu_part", "you tried to allocate", _cpu("cpu_allocator"), 300, lookback=120, after=r":?\d"
    ),
    Head("posix", "posix_memalign", _cpu("posix_memalign"), 80, after=r"\([^)]{0,80}\)==0"),
    Head("numpy", "unable to allocate", _cpu("numpy"), 200, after=SIZE + "foranarray"),
    Head("bad_alloc", "", _cpu("bad_alloc"), 40, pattern=r"std::bad_alloc"),
)
