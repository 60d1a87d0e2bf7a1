"""The probe child's pieces, in process: the data it allocates and the error its stand-in raises."""

from __future__ import annotations

import ctypes
import zlib

import pytest

from mpsd.probe import child
from mpsd.probe.verdict import parse_oom

torch = pytest.importorskip("torch")
MIB = 1 << 20


def _compression(tensor: object) -> float:
    """compressed size / raw size of the tensor's bytes (1.0: incompressible)."""
    raw = ctypes.string_at(tensor.data_ptr(), tensor.nbytes)  # type: ignore[attr-defined]
    return len(zlib.compress(raw, 6)) / len(raw)


def test_the_probes_tensors_are_random_and_do_not_compress_unlike_ones() -> None:
    # macOS compresses memory: torch.ones would under-report what real weights take.
    device = child.FakeDevice(torch, 64 * MIB)
    block = device.alloc(4 * MIB)
    assert block.nbytes == 4 * MIB
    random_ratio = _compression(block)
    ones_ratio = _compression(torch.ones(MIB))
    # uniform float32 in [0, 1): 23 random mantissa bits a word, so ~0.9 at best
    assert random_ratio > 0.85
    assert ones_ratio < 0.01
    assert random_ratio / ones_ratio > 80
    assert _compression(child.make_block(torch, 4 * MIB, "cpu")) > 0.85


def test_each_block_is_new_random_data() -> None:
    a = child.make_block(torch, MIB, "cpu")
    b = child.make_block(torch, MIB, "cpu")
    assert not torch.equal(a, b)


def test_the_stand_in_raises_pytorchs_own_wording_at_the_cap(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PYTORCH_MPS_HIGH_WATERMARK_RATIO", "0.5")
    device = child.FakeDevice(torch, 40 * MIB)
    assert device.max_allowed() == 20 * MIB
    held = [device.alloc(4 * MIB) for _ in range(4)]
    with pytest.raises(RuntimeError) as caught:
        device.alloc(4 * MIB)
    assert len(held) == 4
    message = str(caught.value)
    assert message.startswith(
        "MPS backend out of memory (MPS allocated: 16.00 MiB, other allocations: 448.00 KiB, "
        "max allowed: 20.00 MiB). Tried to allocate 4.00 MiB on shared pool. Use "
        "PYTORCH_MPS_HIGH_WATERMARK_RATIO=0.0"
    )
    found = parse_oom(message)
    assert found is not None
    assert found["max_allowed_bytes"] == 20 * MIB
    assert found["requested_bytes"] == 4 * MIB


@pytest.mark.parametrize(
    ("size", "text"),
    [(1024, "1024 bytes"), (1025, "1.00 KiB"), (MIB, "1024.00 KiB"), (3 * MIB, "3.00 MiB")],
)
def test_sizes_are_printed_as_pytorch_prints_them(size: int, text: str) -> None:
    assert child.format_size(size) == text


def test_the_child_reads_sizes_the_parent_and_tests_pass() -> None:
    assert child.parse_bytes("40M") == 40 * MIB
    assert child.parse_bytes("2097152") == 2 * MIB
    assert child.parse_bytes("1GiB") == 1 << 30


def _steps(progress: object, count: int) -> None:
    from mpsd.probe.verdict import ProbeResult

    result = ProbeResult(0.5, 0.5, MIB, max_allowed_bytes=20 * MIB, swapouts_before=0)
    for n in range(1, count + 1):
        result.allocated_bytes = n * 2 * MIB
        progress(result)  # type: ignore[operator]


def test_progress_is_a_line_every_tenth_of_the_way() -> None:
    import io

    from mpsd.commands.probe import Progress

    stream = io.StringIO()
    _steps(Progress(stream), 20)  # 20 steps of 2 MiB: up to twice the cap
    lines = stream.getvalue().splitlines()
    assert lines[0] == "probe: 2.00 MiB of 20.00 MiB max allowed"
    assert len(lines) == 10  # tenths 1..10; past the cap nothing more
