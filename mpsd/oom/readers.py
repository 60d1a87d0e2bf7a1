"""The readers: what each known error looks like, and how its numbers are read.

They match the squeezed text of ``normalize``. A *head* is a short phrase where an error starts;
its extractor reads the numbers after it, up to the next head, each size labelled by the words
around it (``read_sizes``): so a truncated paste, an older or newer wording, numbers in any
order or a log line glued in the middle are all read.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Optional

from mpsd.oom import finding as fk
from mpsd.oom.finding import Finding
from mpsd.oom.normalize import compiled

Extract = Callable[[str], Optional[Finding]]  # not `Finding | None`: evaluated at run time on 3.9

# PyTorch's GB/MB/KB (2.0 to 2.7) and GiB/MiB/KiB (2.8+) are both powers of 1024.
SIZE = r"(?<!\d)(?<!\d[.,])(\d+(?:[.,]\d+)*)(bytes?|[kmgtp]i?b)"
# A larger "size" is a paste's digit run, no number (below it sums stay well inside a float).
MAX_BYTES = float(1 << 90)


def to_bytes(number: str, unit: str) -> tuple[int, int] | None:
    """``("18.13", "gb")`` -> (bytes, how far the true size may be from it: half the last
    printed digit, as PyTorch rounds every size to two decimals). ``18,13`` has a decimal
    comma, ``3,376,447,488`` thousands separators."""
    power = 0 if unit.startswith("byte") else "kmgtp".index(unit[0]) + 1
    if "," in number:
        parts = number.split(",")
        thousands = "." in number or len(parts) > 2 or len(parts[-1]) == 3 or not power
        number = number.replace(",", "" if thousands else ".")
    try:
        value = float(number)
    except ValueError:  # "1.2.3"
        return None
    scale = 1024**power
    if not value * scale < MAX_BYTES:
        return None
    half = int(scale * 0.5 * 10 ** -len(number.partition(".")[2])) if power else 0
    return round(value * scale), half


# field -> (labels just before the number, labels just after it), each a string of words
Labels = dict[str, tuple[str, str]]
CONTEXT = 48  # how far a label may be from its number
_SEPARATORS = ",;()[]{}.!?|"  # a label never spans one of these


def _longest(context: str, labels: str, at_end: bool) -> int:
    test = context.endswith if at_end else context.startswith
    return max((len(label) for label in labels.split() if test(label)), default=0)


def read_sizes(seg: str, labels: Labels, found: Finding) -> dict[str, int]:
    """Label every size in ``seg`` by the words just before and after it (the longest label
    wins) and set the first of each field on ``found``. Returns the sizes of the fields that
    are not attributes of ``Finding`` (helpers such as CUDA's "reserved but unallocated")."""
    extra: dict[str, int] = {}
    sizes = list(compiled(SIZE).finditer(seg))
    for i, m in enumerate(sizes):
        before = seg[max(sizes[i - 1].end() if i else 0, m.start() - CONTEXT) : m.start()]
        before = before.rstrip(":=~)")
        before = before[max(before.rfind(c) for c in _SEPARATORS) + 1 :].rstrip(":=~")
        next_start = sizes[i + 1].start() if i + 1 < len(sizes) else len(seg)
        after = seg[m.end() : min(next_start, m.end() + CONTEXT)]
        cuts = [i for i in map(after.find, _SEPARATORS) if i >= 0]
        after = after[: min(cuts)] if cuts else after
        parsed = to_bytes(m.group(1), m.group(2))
        best_key, best_len = "", 0
        for key, (befores, afters) in labels.items():
            n = max(_longest(before, befores, True), _longest(after, afters, False))
            if n > best_len:
                best_key, best_len = key, n
        if parsed is None or not best_key:
            continue
        if best_key.startswith("_"):
            extra.setdefault(best_key, parsed[0])
        elif getattr(found, best_key) is None:
            setattr(found, best_key, parsed[0])
            found.rounding[best_key] = parsed[1]
            if not m.group(2).startswith("byte"):
                found.binary_units = "i" in m.group(2)
    return extra


@dataclass(eq=False)  # a key of the cache of readings: one head is itself
class Head:
    """Where an error starts: ``phrase`` (squeezed here), then the regex ``after`` if given.
    A head with ``lookback`` is from inside a message (for a paste that lost the start): it is
    ignored less than ``lookback`` characters after another head, as the rest of that one."""

    phrase: str
    extract: Extract
    max_len: int
    lookback: int = 0
    after: str = ""

    def __post_init__(self) -> None:
        self.phrase = "".join(self.phrase.split()).lower()


MPS_LABELS: Labels = {
    "allocated_bytes": ("mpsallocated currentlyallocated", ""),
    "other_bytes": ("otherallocations", ""),
    "max_allowed_bytes": ("maxallowed", ""),
    "requested_bytes": ("triedtoallocate", ""),
}
BUFFER_LABELS: Labels = {"requested_bytes": ("buffersize", "")}
CPU_LABELS: Labels = {"requested_bytes": ("youtriedtoallocate unabletoallocate", "")}


def _mps_oom(seg: str) -> Finding:
    found = Finding(fk.MPS_OOM, "oom")
    read_sizes(seg, MPS_LABELS, found)
    pools = sorted((seg.find(f"on{name}pool"), name) for name in ("private", "shared"))
    found.pool = next((name for at, name in pools if at >= 0), None)
    if found.max_allowed_bytes is None and "maxallowed" in seg:  # a paste that lost its number
        found.detail = "cap_unread"
    return found


# --- MPS watermark errors ----------------------------------------------------------
_RATIO = r"[a-z]*[:=~]?(-?(?:\d+(?:\.\d*)?|\.\d+)(?:e[-+]?\d+)?|-?nan|-?inf)"


def _watermark(seg: str) -> Finding:
    low = seg.startswith("invalidlow")
    found = Finding(fk.MPS_INVALID_LOW if low else fk.MPS_INVALID_HIGH, "invalid_ratio")
    m = compiled(_RATIO).match(seg, seg.find("water") + 5 if "water" in seg[:20] else 12)
    if m:
        found.ratio = float(m.group(1))
    return found


def plain(kind: str, detail: str, labels: Labels | None = None, within: int = 0) -> Extract:
    """A reader of the sizes ``labels`` names (in the first ``within`` characters if given)."""

    def extract(seg: str) -> Finding:
        found = Finding(kind, detail)
        if labels:
            read_sizes(seg[: within or len(seg)], labels, found)
        return found

    return extract


def _mps_assert(seg: str) -> Finding | None:
    mps = "watermark" in seg[:600] or "mpsallocator" in seg[:600]
    return Finding(fk.MPS_OTHER, "internal_assert") if mps else None


# --- CUDA / HIP --------------------------------------------------------------------
CUDA_LABELS: Labels = {
    "requested_bytes": ("triedtoallocate requested", ""),
    # "capacty": PyTorch's own typo in some versions.
    "total_bytes": ("totalcapacityof totalcapactyof devicelimit", "totalcapacity totalcapacty"),
    "free_bytes": ("ofwhich accordingtocuda", "free isfree"),
    "allocated_bytes": (
        "oftheallocatedmemory currentlyallocated",
        "alreadyallocated isallocatedbypytorch",
    ),
    # "cached" (up to 1.3): cached but unallocated, as the newer "reserved but unallocated".
    "_unallocated": ("", "isreservedbypytorchbutunallocated cached"),
    "reserved_bytes": ("", "reservedintotalbypytorch"),
    "in_use_bytes": ("thisprocesshas", ""),  # "Process N has X" is another process
    "allowed_bytes": ("", "allowed"),
    "private_pool_bytes": ("", "allocatedinprivatepools"),
}
_PROCESS = r"process(\d{1,10})has" + SIZE
_DEVICE = r"(?:gpu|device)~?(\d{1,3})(?![\d.,])"  # "GPU 0"
_BACKEND = r"cuda|hip|xpu"
ALLOC_CONFS = ("expandable_segments", "max_split_size_mb")  # the settings a message suggests


def _cuda(detail: str) -> Extract:
    def extract(seg: str) -> Finding:
        found = Finding(fk.CUDA_OOM, detail)
        backend = compiled(_BACKEND).search(seg[:40])
        found.backend = backend.group() if backend else "cuda"
        if detail in ("oom", "allocation_on_device"):
            unallocated = read_sizes(seg, CUDA_LABELS, found).get("_unallocated")
            device = compiled(_DEVICE).search(seg)
            if device:
                found.device = int(device.group(1))
            allocated = found.allocated_bytes
            if found.reserved_bytes is None and allocated is not None and unallocated is not None:
                # The newer wording splits PyTorch's reserved memory in two.
                found.reserved_bytes = allocated + unallocated
            others = [(int(m[1]), to_bytes(m[2], m[3])) for m in compiled(_PROCESS).finditer(seg)]
            if others or found.in_use_bytes is not None:  # a form that lists processes
                found.other_processes = tuple((pid, n[0]) for pid, n in others if n)
            found.alloc_conf = next((s for s in ALLOC_CONFS if s in seg), None)
        return found

    return extract


# --- MLX (backend/metal/allocator.cpp), Intel's extension for PyTorch ---------------
MLX_LABELS: Labels = {
    "requested_bytes": ("attemptingtoallocate", ""),
    "max_buffer_bytes": ("maximumallowedbuffersizeof", ""),
}


def _mlx(seg: str) -> Finding:
    found = Finding(fk.MLX_OOM, "buffer_size", framework="mlx")
    limit = compiled(r"resourcelimit\((\d{1,12})\)").search(seg[:60])
    if limit:  # (its text has no size)
        found.detail, found.resource_limit = "resource_limit", int(limit[1])
    read_sizes(seg[:200], MLX_LABELS, found)
    return found


# --- what the text around an error tells: the traceback, the program that raised it ---
TRACEBACK = {  # a tag: the words that give it away
    "vllm": "vllm enginecore",
    "dataloader": "dataloader pin_memory",
    "accelerate_finder": "find_executable_batch_size auto_find_batch_size accelerate/utils/memory",
    "lightning_finder": "batchsizefinder scale_batch_size batch_size_scaling",
}
# In this order: a ggml or MLX log may name torch too.
FRAMEWORKS = {"ggml": "ggml llama_", "mlx": "[metal] mlx", "torch": "torch mpsgraph metalperf"}


def _tags(table: dict[str, str], near: str) -> list[str]:
    return [tag for tag, words in table.items() if any(map(near.__contains__, words.split()))]


# The words that tell TensorFlow's logs (it vendors XLA as local_xla) and XLA's other users.
TF_WORDS = ("tensorflow/core", "tensorflow/python", "common_runtime", "keras", "local_xla")
WINDOWS = r"[a-z]:\\[\w$.~-]{1,64}\\"  # "C:\Users\", "PS C:\Users\me>"


# The BFC allocator's "Stats:" (before or after the error): bytes, or sizes with a unit.
_STATS = r"(?<!max)(?<!_)(limit|inuse):(\d+(?:\.\d+)?)(b|[kmgt]ib)?(?![\d.])"


def stats(found: Finding, near: str) -> None:
    """``found``'s limit and memory in use from the BFC allocator's stats in ``near``."""
    for name, number, unit in compiled(_STATS).findall(near):
        if not unit:  # a count of bytes: "InUse: 1.5" states none
            n = 0 if "." in number else int(number)
        else:
            n = (to_bytes(number, unit) or (0, 0))[0]
        key = "limit_bytes" if name == "limit" else "in_use_bytes"
        if n and getattr(found, key) is None:
            setattr(found, key, n)


def around(found: Finding, near: str) -> Finding:
    """``found`` with what squeezed ``near`` (its lines and the traceback before) tells: its
    ``context`` (also "windows" or "r": the user's shell), the framework of an MPS error
    (Metal's command-buffer one: any program's) or of an XLA one, the BFC allocator's stats."""
    context, framework, kind = set(_tags(TRACEBACK, near)), found.framework, found.kind
    if compiled(r"errore?in\(function\(").search(near):
        context.add("r")
    elif compiled(WINDOWS).search(near):
        context.add("windows")
    if kind == fk.MPS_OTHER and found.detail not in ("command_buffer_oom", "status_5"):
        framework = "torch"
    elif kind == fk.MPS_OTHER:
        framework = next(iter(_tags(FRAMEWORKS, near)), None)
    elif kind in (fk.XLA_OOM, fk.TF_OOM):  # JAX's, or another XLA user's (Julia's)
        tf = found.detail in ("tensor", "cuda_driver") or any(map(near.__contains__, TF_WORDS))
        jax = "jax" in near or "xla/python" in near
        kind, framework = (fk.TF_OOM, "tensorflow") if tf else (fk.XLA_OOM, "jax" if jax else "xla")
        stats(found, near)
    elif kind == fk.CUDA_OOM and "ggml" in near:  # llama.cpp's CUDA errors
        kind, framework = fk.GGML_OOM, "ggml"
        device = compiled(r"currentdevice:(\d{1,2})").search(near)
        found.device = int(device[1]) if device else found.device
    elif kind in (fk.CPU_OOM, fk.MLX_OOM) and framework is None:
        framework = {"numpy": "numpy", "bad_alloc": None}.get(found.detail, "torch")
        framework = "mlx" if kind == fk.MLX_OOM else framework
    if context or (kind, framework) != (found.kind, found.framework):
        return replace(found, kind=kind, context=frozenset(context), framework=framework)
    return found


def _status5(seg: str) -> Finding:
    oom = "insufficientmemory" in seg
    return Finding(fk.MPS_OTHER, "command_buffer_oom" if oom else "status_5")


_CPU = plain(fk.CPU_OOM, "cpu_allocator", CPU_LABELS)
_XPU = plain(fk.XPU_SIZE, "size_limit", CUDA_LABELS, 120)
HEADS: tuple[Head, ...] = (
    Head("mps backend out", _mps_oom, 900),
    Head("mps allocated", _mps_oom, 900, lookback=120, after=r":?\d"),
    Head("invalid low water", _watermark, 60),
    Head("invalid high water", _watermark, 60),
    Head("invalid buffer size", plain(fk.MPS_OTHER, "invalid_buffer_size", BUFFER_LABELS, 40), 80),
    Head("bytes of ndarray", plain(fk.MPS_OTHER, "ndarray_too_large"), 60),
    Head("ndarray dimension", plain(fk.MPS_OTHER, "dimension_too_large"), 60),
    Head("tensor dims larger", plain(fk.MPS_OTHER, "dimension_too_large"), 60),
    Head("product of dimension", plain(fk.MPS_OTHER, "dimension_too_large"), 60),
    Head("callback error out of", plain(fk.MPS_OTHER, "command_buffer_oom"), 60, lookback=60),
    Head("insufficient memory", plain(fk.MPS_OTHER, "command_buffer_oom"), 60, 100, r"\(0*8"),
    # ggml's Metal: "command buffer 0 failed with status 5" (an error; the reason may follow)
    Head("command buffer", _status5, 200, after=r"\d{1,4}failedwithstatus5"),
    Head("internal assert", _mps_assert, 600),
    Head("cuda error: out of mem", _cuda("runtime"), 60),
    Head("hip error: out of mem", _cuda("runtime"), 60),
    # 0.x-1.x: "cuda runtime error (2) : out of memory"
    Head("cuda runtime err", _cuda("runtime"), 60, after=r"(?:or)?(?:\(\d+\))?:?outofmem"),
    Head("cuda out of mem", _cuda("oom"), 1400),
    Head("hip out of mem", _cuda("oom"), 1400),
    Head("xpu out of mem", _cuda("oom"), 1400),
    Head("tried to allocate", _cuda("oom"), 1400, lookback=100, after=SIZE + r"[.(]*gpu~?\d"),
    Head("cudaErrorMemoryAllocation", _cuda("runtime"), 60),
    Head("hipErrorOutOfMemory", _cuda("runtime"), 60),
    Head("STATUS_ALLOC_FAILED", _cuda("library_alloc_failed"), 60),
    Head("allocation on device", _cuda("allocation_on_device"), 700),
    Head("default cpu allocator", _CPU, 400),
    Head("you tried to allocate", _CPU, 300, lookback=120, after=r":?\d"),
    Head("posix_memalign", plain(fk.CPU_OOM, "posix_memalign"), 80, after=r"\([^)]{0,80}\)==0"),
    Head("std::bad_alloc", plain(fk.CPU_OOM, "bad_alloc"), 40),
    Head("[metal::malloc]", _mlx, 200),
    Head("attempting to allocate", _mlx, 200, lookback=40, after=SIZE + "whichisgreater"),
    Head("resource limit (", _mlx, 60, lookback=40, after=r"\d+\)exceeded"),
    Head("can not allocate memory block with size larger", _XPU, 140),
    Head("[malloc_or_wait]", plain(fk.MLX_OOM, "malloc_or_wait", CPU_LABELS), 100),
    Head("error 2: out of mem", _cuda("init"), 60),  # cudaGetDeviceCount() (WSL2)
    Head("cuda error 2 at", _cuda("runtime"), 200),  # ggml's CUDA before 2024
    Head("no available memory for the cache blocks", plain(fk.CUDA_OOM, "vllm_cache"), 60),
    Head("thcudacheck fail", _cuda("runtime"), 300, after=r"[^:]{0,200}error=2:outofmem"),
)
