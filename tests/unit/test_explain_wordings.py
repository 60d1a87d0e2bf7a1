"""Wordings the fixtures do not have, built from the format strings in PyTorch's source
(each test names the file the wording comes from), and what explain says about them."""

from __future__ import annotations

import mpsd
from mpsd.oom import find_errors
from mpsd.oom.render import render

GIB = 1 << 30
MIB = 1 << 20


def one(text: str) -> dict:
    found = mpsd.explain(text)
    assert len(found) == 1, found
    return found[0]


def test_mps_oom_without_max_allowed_when_no_cap_is_set() -> None:
    # aten/src/ATen/mps/MPSAllocator.mm, the branch taken with the high watermark at 0.0
    f = one(
        "RuntimeError: MPS backend out of memory (MPS allocated: 30.50 GiB, other allocations: "
        "1.25 GiB). Tried to allocate 2.00 GiB on private pool."
    )
    assert f["max_allowed_bytes"] is None
    assert f["allocated_bytes"] == round(30.5 * GIB)
    assert f["requested_bytes"] == 2 * GIB
    text = render(
        find_errors(
            "MPS backend out of memory (MPS allocated: 1.00 GiB, other "
            "allocations: 0 bytes). Tried to allocate 2.00 MiB on shared pool."
        )
    )
    assert "no cap was in force" in text


def test_cuda_oom_oldest_wording_with_cached() -> None:
    # c10/cuda/CUDACachingAllocator.cpp before "reserved" replaced "cached" (PyTorch 1.3)
    f = one(
        "RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 1; 10.92 GiB total "
        "capacity; 9.92 GiB already allocated; 5.44 MiB free; 56.88 MiB cached)"
    )
    assert f["device"] == 1
    assert f["reserved_bytes"] == round(56.88 * MIB)
    assert f["total_bytes"] == round(10.92 * GIB)


def test_cuda_oom_with_a_memory_fraction_cap() -> None:
    # the "allowed" field PyTorch adds when set_per_process_memory_fraction is in force
    f = one(
        "CUDA out of memory. Tried to allocate 1.50 GiB (GPU 0; 15.78 GiB total capacity; "
        "2.00 GiB already allocated; 13.20 GiB free; 3.00 GiB allowed; 2.04 GiB reserved in "
        "total by PyTorch)"
    )
    assert f["allowed_bytes"] == 3 * GIB
    assert f["reserved_bytes"] == round(2.04 * GIB)
    assert f["free_bytes"] == round(13.2 * GIB)


def test_cuda_allocation_on_device_wording() -> None:
    # c10/cuda/CUDAMallocAsyncAllocator.cpp
    f = one(
        "torch.OutOfMemoryError: Allocation on device 0 would exceed allowed memory. (out of "
        "memory)\nCurrently allocated     : 3.57 GiB\nRequested               : 1.53 GiB\n"
        "Device limit            : 8.00 GiB\nFree (according to CUDA): 3.11 GiB\n"
        "PyTorch limit (set by user-supplied memory fraction)\n"
        "                        : 17179869184.00 GiB"
    )
    assert f["kind"] == "cuda_oom"
    assert (f["device"], f["allocated_bytes"], f["total_bytes"]) == (
        0,
        round(3.57 * GIB),
        8 * GIB,
    )
    assert f["requested_bytes"] == round(1.53 * GIB)
    assert f["free_bytes"] == round(3.11 * GIB)
    # As front ends show it, the first line only:
    assert one("torch.OutOfMemoryError: Allocation on device")["kind"] == "cuda_oom"


def test_invalid_high_watermark_ratio() -> None:
    f = one("RuntimeError: invalid high watermark ratio 2.5")
    assert (f["kind"], f["ratio"]) == ("mps_invalid_high_watermark", 2.5)
    assert "between 0 and 2" in render(find_errors("invalid high watermark ratio 2.5"))


def test_a_ratio_followed_by_the_next_log_line_on_the_same_line() -> None:
    f = one("RuntimeError: invalid low watermark ratio 1.4 2024-01-01 12:00:00 INFO next")
    assert f["ratio"] == 1.4


def test_the_mps_dimension_and_ndarray_errors() -> None:
    assert one("RuntimeError: product of dimension sizes > 2**31'")["kind"] == "mps_other"
    f = one(
        "failed assertion `[MPSNDArray initWithDevice:descriptor:] Error: NDArray "
        "dimension length > INT_MAX'"
    )
    assert f["detail"] == "dimension_too_large"


def test_metals_command_buffer_out_of_memory() -> None:
    f = one(
        "Error: command buffer exited with error status.\n\tThe Metal Performance Shaders "
        "operations encoded on it may not have completed.\n\tError: \n\t(null)\n\tInsufficient "
        "Memory (00000008:kIOGPUCommandBufferCallbackErrorOutOfMemory)"
    )
    assert (f["kind"], f["detail"]) == ("mps_other", "command_buffer_oom")


def test_numpy_and_cuda_library_allocation_failures() -> None:
    f = one(
        "numpy.core._exceptions._ArrayMemoryError: Unable to allocate 1.45 GiB for an array "
        "with shape (10000, 19500) and data type float64"
    )
    assert (f["kind"], f["requested_bytes"]) == ("cpu_oom", round(1.45 * GIB))
    g = one(
        "RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`"
    )
    assert g["kind"] == "cuda_oom"


def test_similar_words_that_are_not_errors_give_nothing() -> None:
    quiet = (
        "Set PYTORCH_MPS_HIGH_WATERMARK_RATIO=0.7 and PYTORCH_MPS_LOW_WATERMARK_RATIO=0.7\n"
        "torch.mps.current_allocated_memory() = 1.25 GB, max allowed by the driver\n"
        "We tried to allocate a bigger buffer once; the memory allocator is fine.\n"
        "CUDA available: True, total capacity 24 GB\n"
    )
    assert mpsd.explain(quiet) == []
