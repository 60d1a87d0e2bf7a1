"""Wordings the fixtures do not have, built from the format strings in PyTorch's source (each
case names the file the wording comes from), and the Macs behind a cap."""

from __future__ import annotations

import pytest

import mpsd
from mpsd.oom import macs

GIB = 1 << 30
MIB = 1 << 20

WORDINGS = [
    (  # aten/src/ATen/mps/MPSAllocator.mm, with the high watermark at 0.0: no cap
        "RuntimeError: MPS backend out of memory (MPS allocated: 30.50 GiB, other allocations: "
        "1.25 GiB). Tried to allocate 2.00 GiB on private pool.",
        {
            "max_allowed_bytes": None,
            "allocated_bytes": round(30.5 * GIB),
            "requested_bytes": 2 * GIB,
        },
    ),
    (  # c10/cuda/CUDACachingAllocator.cpp before "reserved" replaced "cached" (PyTorch 1.3)
        "RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 1; 10.92 GiB total "
        "capacity; 9.92 GiB already allocated; 5.44 MiB free; 56.88 MiB cached)",
        # "cached" is cached but unallocated: PyTorch's total is allocated + cached
        {
            "device": 1,
            "reserved_bytes": round(9.92 * GIB + 56.88 * MIB),
            "total_bytes": round(10.92 * GIB),
        },
    ),
    (  # the "allowed" field of set_per_process_memory_fraction
        "CUDA out of memory. Tried to allocate 1.50 GiB (GPU 0; 15.78 GiB total capacity; "
        "2.00 GiB already allocated; 13.20 GiB free; 3.00 GiB allowed; 2.04 GiB reserved in "
        "total by PyTorch)",
        {
            "allowed_bytes": 3 * GIB,
            "reserved_bytes": round(2.04 * GIB),
            "free_bytes": round(13.2 * GIB),
        },
    ),
    (  # c10/cuda/CUDAMallocAsyncAllocator.cpp
        "torch.OutOfMemoryError: Allocation on device 0 would exceed allowed memory. (out of "
        "memory)\nCurrently allocated     : 3.57 GiB\nRequested               : 1.53 GiB\n"
        "Device limit            : 8.00 GiB\nFree (according to CUDA): 3.11 GiB\n"
        "PyTorch limit (set by user-supplied memory fraction)\n"
        "                        : 17179869184.00 GiB",
        {
            "kind": "cuda_oom",
            "device": 0,
            "allocated_bytes": round(3.57 * GIB),
            "total_bytes": 8 * GIB,
            "requested_bytes": round(1.53 * GIB),
            "free_bytes": round(3.11 * GIB),
        },
    ),
    ("torch.OutOfMemoryError: Allocation on device", {"kind": "cuda_oom"}),  # its first line
    (
        "RuntimeError: invalid high watermark ratio 2.5",
        {"kind": "mps_invalid_high_watermark", "ratio": 2.5},
    ),
    ("RuntimeError: invalid low watermark ratio 1.4 2024-01-01 12:00:00 INFO next", {"ratio": 1.4}),
    ("RuntimeError: product of dimension sizes > 2**31'", {"kind": "mps_other"}),
    (
        "failed assertion `[MPSNDArray initWithDevice:descriptor:] Error: NDArray "
        "dimension length > INT_MAX'",
        {"detail": "dimension_too_large"},
    ),
    (
        "Error: command buffer exited with error status.\n\tThe Metal Performance Shaders "
        "operations encoded on it may not have completed.\n\tError: \n\t(null)\n\tInsufficient "
        "Memory (00000008:kIOGPUCommandBufferCallbackErrorOutOfMemory)",
        {"kind": "mps_other", "detail": "command_buffer_oom", "count": 1},
    ),
    (
        "numpy.core._exceptions._ArrayMemoryError: Unable to allocate 1.45 GiB for an array "
        "with shape (10000, 19500) and data type float64",
        # The shape and type give the exact size that "1.45 GiB" rounds.
        {"kind": "cpu_oom", "requested_bytes": 10000 * 19500 * 8, "framework": "numpy"},
    ),
    (
        "RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`",
        {"kind": "cuda_oom"},
    ),
    (
        "RuntimeError: cuda runtime error (2) : out of memory at /pytorch/THCStorage.cu:66",
        {"kind": "cuda_oom", "detail": "runtime"},
    ),
    (  # a decimal comma and thousands separators
        "MPS backend out of memory (MPS allocated: 18,13 GB, other allocations: "
        "3,376,447,488 bytes",
        {"allocated_bytes": round(18.13 * GIB), "other_bytes": 3376447488},
    ),
]


@pytest.mark.parametrize(("text", "expected"), WORDINGS)
def test_each_wording_gives_one_finding_with_its_numbers(text: str, expected: dict) -> None:
    found = mpsd.explain(text)
    assert len(found) == 1, found
    assert {k: found[0][k] for k in expected} == expected


def test_a_default_cap_names_its_mac_first_and_a_cap_that_fits_none_gives_no_guess() -> None:
    for cap_gib, ram in ((18.13, 16), (9.07, 8), (27.20, 24), (36.27, 32), (81.60, 64)):
        best = macs.guesses(round(cap_gib * GIB))[0]
        assert (best.ratio, best.ram_gb) == (1.7, ram)
    assert macs.guesses(round(1.95 * GIB)) == []
    assert macs.guesses(0) == []
    assert all(g.ratio >= macs.MIN_GUESS or g.is_default for g in macs.guesses(round(6.77 * GIB)))
