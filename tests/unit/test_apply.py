"""`mpsd.apply()`: the variables for a process no hooked shell started (Jupyter, VS Code)."""

from __future__ import annotations

import os
import subprocess
import sys
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


def test_apply_in_a_fresh_process_reaches_torch_through_the_environment(project: Path) -> None:
    pytest.importorskip("torch")
    code = (
        "import mpsd, os; r = mpsd.apply(); import torch; "
        f"print(r.action, os.environ['{HIGH_VAR}'], 'torch' in __import__('sys').modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=project, capture_output=True, text=True, timeout=120
    )
    assert out.stdout.split() == ["environment", "0.77", "True"], out.stderr


class FakeMps:
    """torch.mps of a Mac whose MPS allocator already holds memory."""

    def __init__(self, in_use: int) -> None:
        self.in_use = in_use
        self.fractions: list[float] = []

    def driver_allocated_memory(self) -> int:
        return self.in_use

    def current_allocated_memory(self) -> int:
        return self.in_use

    def set_per_process_memory_fraction(self, fraction: float) -> None:
        self.fractions.append(fraction)


@pytest.fixture
def torch_with_mps(monkeypatch: pytest.MonkeyPatch) -> object:
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: True)
    return torch


def test_apply_after_mps_started_sets_the_fraction_and_warns(
    project: Path, torch_with_mps: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = FakeMps(in_use=512 << 20)
    monkeypatch.setattr(torch_with_mps, "mps", fake)
    with pytest.warns(RuntimeWarning, match="low watermark could not"):
        result = mpsd.apply()
    assert result.action == FRACTION
    assert fake.fractions == [0.77]
    assert os.environ[HIGH_VAR] == "0.77"


def test_apply_with_torch_imported_but_mps_unused_only_sets_the_environment(
    project: Path, torch_with_mps: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = FakeMps(in_use=0)
    monkeypatch.setattr(torch_with_mps, "mps", fake)
    result = mpsd.apply()
    assert result.action == ENVIRONMENT and fake.fractions == []


def test_apply_with_real_cpu_torch_and_no_mps(project: Path) -> None:
    pytest.importorskip("torch")
    assert mpsd.apply().action == ENVIRONMENT


def test_import_mpsd_stays_light() -> None:
    heavy = "('torch', 'psutil', 'tomlkit')"
    code = f"import sys, mpsd; print(sorted(m for m in {heavy} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "[]"
