"""`mpsd.apply()`: the variables for a process no hooked shell started (Jupyter, VS Code)."""

from __future__ import annotations

import os
import subprocess
import sys
import types
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

import mpsd
from mpsd.env.decision import HIGH_VAR, LOW_VAR, MARK_HIGH
from mpsd.env.inprocess import ENVIRONMENT, FRACTION, KEPT, NOTHING
from tests.integration.shells import opted_in_project


@pytest.fixture(autouse=True)
def restore_environment() -> Iterator[None]:
    """apply() writes os.environ itself; put it back after each test."""
    saved = dict(os.environ)
    yield
    os.environ.clear()
    os.environ.update(saved)


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = opted_in_project(tmp_path)
    monkeypatch.chdir(path)
    return path


def test_apply_sets_both_variables_in_a_project_before_torch(project: Path) -> None:
    result = mpsd.apply()
    assert result.action == ENVIRONMENT
    assert (result.high, result.low, result.project) == ("0.77", "0.7", str(project))
    assert os.environ[HIGH_VAR] == "0.77" and os.environ[LOW_VAR] == "0.7"
    assert os.environ[MARK_HIGH] == "0.77"


def test_apply_outside_a_project_does_nothing_unless_asked(project: Path, tmp_path: Path) -> None:
    result = mpsd.apply(str(tmp_path))
    assert result.action == NOTHING and "mpsd enable" in result.reason
    assert HIGH_VAR not in os.environ
    assert mpsd.apply(str(tmp_path), anywhere=True).action == ENVIRONMENT
    assert os.environ[HIGH_VAR] == "0.77"


def test_apply_keeps_values_set_by_hand(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(HIGH_VAR, "1.1")
    result = mpsd.apply()
    assert result.action == KEPT and result.high == "1.1" and result.low is None
    assert LOW_VAR not in os.environ


class FakeTorch(types.ModuleType):
    """torch as apply() sees it after `import torch`: only ``backends.mps.is_available`` and
    ``mps.set_per_process_memory_fraction`` exist, so any call that would reach the allocator
    fails the test."""

    def __init__(self, mps: bool = True, setter: object = None) -> None:
        super().__init__("torch")
        self.fractions: list[float] = []
        self.backends = types.SimpleNamespace(mps=types.SimpleNamespace(is_available=lambda: mps))
        self.mps = types.SimpleNamespace()
        if setter is not False:
            self.mps.set_per_process_memory_fraction = setter or self.fractions.append


def test_apply_after_import_torch_sets_the_fraction_without_asking_the_allocator(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    torch = FakeTorch()
    monkeypatch.setitem(sys.modules, "torch", torch)
    result = mpsd.apply()
    assert (result.action, result.high, result.low) == (FRACTION, "0.77", "0.7")
    assert torch.fractions == [0.77]


@pytest.mark.parametrize("torch", [FakeTorch(mps=False), FakeTorch(setter=False)])
def test_apply_after_a_torch_without_mps_or_older_than_2_0_sets_the_environment_quietly(
    project: Path, monkeypatch: pytest.MonkeyPatch, torch: FakeTorch
) -> None:
    monkeypatch.setitem(sys.modules, "torch", torch)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result = mpsd.apply()
    assert (result.action, os.environ[HIGH_VAR]) == (ENVIRONMENT, "0.77")


def test_apply_warns_when_torch_refuses_the_fraction(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(fraction: float) -> None:
        raise RuntimeError("invalid fraction")

    monkeypatch.setitem(sys.modules, "torch", FakeTorch(setter=refuse))
    with pytest.warns(RuntimeWarning, match="restart it") as seen:
        result = mpsd.apply()
    assert (result.action, os.environ[HIGH_VAR]) == (ENVIRONMENT, "0.77")
    assert "set_per_process_memory_fraction(0.77) failed: invalid fraction" in str(seen[0].message)


@pytest.mark.parametrize(("started", "late"), [(True, True), (False, False), (None, None)])
def test_apply_after_import_torch_says_whether_the_low_limit_came_too_late(
    project: Path, monkeypatch: pytest.MonkeyPatch, started: bool | None, late: bool | None
) -> None:
    """torch 2.13's private _accelerator_isAllocatorInitialized() asks without starting the
    allocator: asked before the fraction is set (which starts it)."""
    torch = FakeTorch()
    asked: list[str] = []

    def initialized() -> bool:
        asked.append("asked" if not torch.fractions else "after the fraction")
        if started is None:
            raise RuntimeError("Cannot access accelerator device when none is available.")
        return started

    torch._C = types.SimpleNamespace(_accelerator_isAllocatorInitialized=initialized)
    monkeypatch.setitem(sys.modules, "torch", torch)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        result = mpsd.apply()
    assert (result.action, result.low_too_late, torch.fractions) == (FRACTION, late, [0.77])
    assert asked == ["asked"]
    messages = [str(w.message) for w in seen]
    if late:
        (message,) = messages
        assert "the low limit stays what PyTorch read then, not 0.7" in message
    else:
        assert messages == []


def test_apply_before_torch_or_with_an_older_torch_knows_nothing_of_lateness(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert mpsd.apply().low_too_late is None
    monkeypatch.setitem(sys.modules, "torch", FakeTorch())  # no torch._C function
    assert mpsd.apply().low_too_late is None


@pytest.mark.slow
def test_apply_then_the_real_torch_reads_the_environment_and_nothing_reaches_the_allocator(
    project: Path,
) -> None:
    """With the real (CPU) torch: apply() before `import torch`, then again after it, calls no
    torch.mps function that would start the allocator."""
    pytest.importorskip("torch")
    code = f"""
import os, sys, warnings
import mpsd
first = mpsd.apply()
assert "torch" not in sys.modules
import torch
warnings.simplefilter("error")
reached = []
for name in ("driver_allocated_memory", "current_allocated_memory", "recommended_max_memory",
             "empty_cache", "synchronize"):
    setattr(torch.mps, name, lambda *a, _n=name: reached.append(_n) or 0)
second = mpsd.apply()
print(first.action, second.action, os.environ["{HIGH_VAR}"], os.environ["{LOW_VAR}"], reached)
"""
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=project, capture_output=True, text=True, timeout=180
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [ENVIRONMENT, ENVIRONMENT, "0.77", "0.7", "[]"]


def test_import_mpsd_stays_light() -> None:
    heavy = "('torch', 'psutil', 'tomlkit')"
    code = f"import sys, mpsd; print(sorted(m for m in {heavy} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "[]"
