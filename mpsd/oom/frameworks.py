"""The readers of other frameworks' out-of-memory errors: NumPy, JAX and XLA, TensorFlow,
llama.cpp (ggml) on CUDA and ROCm, and the bare SIGKILL a shell or an IDE reports. Like
``readers``, each reads the squeezed text from its head on."""

from __future__ import annotations

from math import prod

from mpsd.oom import finding as fk
from mpsd.oom.finding import Finding
from mpsd.oom.normalize import compiled
from mpsd.oom.readers import CPU_LABELS, Extract, Head, plain, read_sizes

# XLA prints exact bytes ("285212672 bytes"), its BFC allocator "34.10MiB (rounded to N)".
_EXACT = (
    r"(?:trying|failed)toallocate(\d{1,16})bytes|roundedto(\d{1,16})|\((\d{1,16})bytes\)fromdevice"
)
_DRIVER = r"[\d.]{1,12}[kmg]\(\d{1,16}bytes\)fromdevice"  # TF: "378.60M (396990720 bytes)"
_FREE_TOTAL = r"freememory/totalmemory:(\d{1,16})/(\d{1,16})"
_TPU = r"used(\d+(?:\.\d+)?)gof(\d+(?:\.\d+)?)g"  # XLA:TPU's "G" is GiB
_ARGUMENTS = r"\((\d{1,16})\)exceedsthebaselimit\((\d{1,16})\)"
# TensorFlow: "shape[16,64,64,64] and type float on .../device:GPU:0"; bytes of each type.
_SHAPE = r"shape\[([\d,]{0,200})\]andtype([a-z]+\d*)on/job:[\w:/]{0,80}?device:(gpu|cpu):(\d{1,3})"
DTYPES = {"float": 4, "half": 2, "bfloat16": 2, "double": 8, "int8": 1, "uint8": 1, "bool": 1}
DTYPES |= {"int16": 2, "uint16": 2, "int32": 4, "uint32": 4, "int64": 8, "uint64": 8}
DTYPES |= {"complex64": 8, "complex128": 16, "float16": 2, "float32": 4, "float64": 8}
_NUMPY_SHAPE = r"withshape\(([\d,]{0,200})\)anddatatype([a-z]+\d*)"


def numpy(seg: str) -> Finding:
    """NumPy's ``_ArrayMemoryError``: "Unable to allocate 184. MiB for an array with shape
    (64, 26, 26, 3, 371) and data type float32": the shape gives the exact bytes."""
    found = Finding(fk.CPU_OOM, "numpy", framework="numpy")
    m = compiled(_NUMPY_SHAPE).search(seg, 0, 200)
    if m and m[2] in DTYPES:
        found.requested_bytes = prod(int(n) for n in m[1].split(",") if n) * DTYPES[m[2]]
    else:
        read_sizes(seg, CPU_LABELS, found)
    return found


def _xla(kind: str, detail: str) -> Extract:
    def extract(seg: str) -> Finding:
        found = Finding(kind, detail)
        exact = compiled(_EXACT).search(seg, 0, 200)
        if exact:
            found.requested_bytes = int(exact[1] or exact[2] or exact[3])
        elif detail == "bfc":
            read_sizes(seg[:120], {"requested_bytes": ("tryingtoallocate", "")}, found)
        if detail == "bfc" and "notafailure" in seg[:400]:
            found.detail = "bfc_warning"
        m = compiled(_FREE_TOTAL).search(seg, 0, 400)
        if m:
            found.free_bytes, found.total_bytes = int(m[1]), int(m[2])
        m = compiled(_TPU).search(seg, 0, 200)
        if m:
            found.in_use_bytes, found.total_bytes = (round(float(g) * 2**30) for g in m.groups())
        m = compiled(_ARGUMENTS).search(seg, 0, 200)
        if m:
            found.requested_bytes, found.limit_bytes = int(m[1]), int(m[2])
        m = compiled(_SHAPE).search(seg, 0, 500)
        if m and m[2] in DTYPES:
            found.requested_bytes = prod(int(n) for n in m[1].split(",") if n) * DTYPES[m[2]]
            found.device = int(m[4]) if m[3] == "gpu" else None
            found.detail = "cpu" if m[3] == "cpu" else detail
        return found

    return extract


# llama.cpp: "allocating 51748.72 MiB on device 1: cudaMalloc failed", "failed to allocate
# CUDA1 buffer of size 54262464512" (exact: it wins), "unable to allocate ROCm0 buffer".
_BUFFER = r"(cuda|rocm|vulkan|sycl|metal)(\d{0,2})bufferofsize(\d{1,16})"
_GGML_DEVICE = r"(?:ondevice|currentdevice:|(?:cuda|rocm)(?=\d{1,2}buffer))(\d{1,2})"


def _ggml(seg: str) -> Finding:
    backend = "rocm" if "rocm" in seg[:200] or "hip" in seg[:60] else "cuda"
    found = Finding(fk.GGML_OOM, "alloc", backend=backend, framework="ggml")
    exact = compiled(_BUFFER).search(seg, 0, 300)
    if exact:
        found.requested_bytes = int(exact[3])
    else:
        read_sizes(seg[:100], {"requested_bytes": ("allocating", "")}, found)
    device = compiled(_GGML_DEVICE).search(seg, 0, 300)
    found.device = int(device[1]) if device else None
    return found


HEADS = (
    Head("unable to allocate", numpy, 200, after=r"[\d.,]{1,30}(?:bytes?|[kmgtp]i?b)foran"),
    Head("out of memory while trying to allocate", _xla(fk.XLA_OOM, "resource_exhausted"), 200),
    Head("cumemallocasync failed to allocate", _xla(fk.XLA_OOM, "cuda_async"), 400),
    Head("ran out of memory in memory space", _xla(fk.XLA_OOM, "tpu_hbm"), 200),
    Head("the byte size of input/output arguments", _xla(fk.XLA_OOM, "arguments"), 200),
    Head("oom when allocating tensor", _xla(fk.TF_OOM, "tensor"), 500),
    Head("ran out of memory trying to allocate", _xla(fk.TF_OOM, "bfc"), 400),
    Head("failed to allocate", _xla(fk.TF_OOM, "cuda_driver"), 80, after=_DRIVER),
    Head("ggml_backend_cuda_buffer_type_alloc_buffer", _ggml, 400),
    Head("cudamalloc failed", _ggml, 400, 200),
    Head("failed to allocate", _ggml, 300, 200, r"(?:cuda|rocm|vulkan|sycl)\d*bufferofsize"),
    Head("unable to allocate", _ggml, 100, after=r"(?:cuda|rocm|vulkan|sycl)\d*buffer"),
    Head("killed: 9", plain(fk.SIGKILL, "killed"), 20),
    Head("zsh: killed", plain(fk.SIGKILL, "killed"), 20),
    Head("exit code", plain(fk.SIGKILL, "exit_code"), 20, after=r"(?:137|-9)(?!\d)"),
)
