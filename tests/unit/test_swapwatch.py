"""What `mpsd probe` watches while the child fills MPS: swap-outs and the pressure level."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from mpsd.machine.sample import Sample
from mpsd.probe.runner import choose_watch


def test_the_stand_in_swap_counter_is_chosen_by_env_and_read_from_its_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    counter = tmp_path / "swap"
    counter.write_text("7 2\n")
    monkeypatch.setenv("MPSD_PROBE_FAKE_SWAP", str(counter))
    watch = choose_watch()
    assert watch() == (7, 2)
    counter.write_text("9\n")
    assert watch() == (9, None)
    counter.unlink()
    assert watch() == (None, None)


def test_the_memory_source_is_read_each_step_and_a_failed_read_is_no_reading(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from mpsd.machine import sampler

    class Source:
        reads = 0

        def read(self) -> Sample:
            Source.reads += 1
            if Source.reads > 1:
                raise sampler.SampleError("host_statistics64 failed")
            return Sample(0.0, 1, 2, swapouts=3, pressure=1, source="test")

    monkeypatch.setattr(sampler, "default_source", Source)
    monkeypatch.delenv("MPSD_PROBE_FAKE_SWAP", raising=False)
    watch = choose_watch()
    assert watch() == (3, 1)
    assert watch() == (None, None)


def test_this_machines_swap_counter_is_watched(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MPSD_PROBE_FAKE_SWAP", raising=False)
    swapouts, _pressure = choose_watch()()
    if sys.platform.startswith("linux") and Path("/proc/vmstat").exists():
        assert isinstance(swapouts, int) and swapouts >= 0
