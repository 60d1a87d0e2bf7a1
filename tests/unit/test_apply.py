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


# Run in a fresh process with the real (CPU) torch: torch.mps functions that would reach the
# allocator are replaced by ones that record the call, so a test sees any of them used.
ALLOCATOR_WATCH = """
import os, sys, warnings
import torch
warnings.simplefilter("error")  # any warning apply() gives fails the run
reached = []
for name in ("driver_allocated_memory", "current_allocated_memory", "recommended_max_memory",
             "empty_cache", "synchronize"):
    if hasattr(torch.mps, name):
        setattr(torch.mps, name, lambda *a, _n=name: reached.append(_n) or 0)
fractions = []
{setup}
import mpsd
r = mpsd.apply()
print(r.action, os.environ.get("{high}"), os.environ.get("{low}"), fractions, reached)
"""


def _watched(project: Path, setup: str = "") -> list[str]:
    pytest.importorskip("torch")
    code = ALLOCATOR_WATCH.format(setup=setup, high=HIGH_VAR, low=LOW_VAR)
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=project, capture_output=True, text=True, timeout=180
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().split(None, 3)


def test_apply_after_import_torch_without_mps_sets_the_environment_and_raises_nothing(
    project: Path,
) -> None:
    """The CPU build of torch has no MPS: nothing to call in torch, nothing reaches it."""
    action, high, low, rest = _watched(project)
    assert (action, high, low) == (ENVIRONMENT, "0.77", "0.7")
    assert rest == "[] []"


def test_apply_after_import_torch_with_mps_sets_the_fraction_without_asking_the_allocator(
    project: Path,
) -> None:
    setup = (
        "torch.backends.mps.is_available = lambda: True\n"
        "torch.mps.set_per_process_memory_fraction = fractions.append\n"
    )
    action, high, low, rest = _watched(project, setup)
    assert (action, high, low) == (FRACTION, "0.77", "0.7")
    assert rest == "[0.77] []"  # the fraction set; no allocator query before it


def test_apply_warns_when_torch_refuses_the_fraction(project: Path) -> None:
    code = (
        "import os, warnings, torch\n"
        "torch.backends.mps.is_available = lambda: True\n"
        "def refuse(f): raise RuntimeError('invalid fraction')\n"
        "torch.mps.set_per_process_memory_fraction = refuse\n"
        "import mpsd\n"
        "with warnings.catch_warnings(record=True) as seen:\n"
        "    warnings.simplefilter('always')\n"
        "    r = mpsd.apply()\n"
        f"print(r.action, os.environ['{HIGH_VAR}'])\n"
        "print(seen[0].message)\n"
    )
    pytest.importorskip("torch")
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=project, capture_output=True, text=True, timeout=180
    )
    assert done.returncode == 0, done.stderr
    first, message = done.stdout.splitlines()[:2]
    assert first == f"{ENVIRONMENT} 0.77"
    assert "set_per_process_memory_fraction(0.77) failed: invalid fraction" in message
    assert "restart it" in message


def test_apply_with_a_torch_older_than_2_0_sets_the_environment_quietly(project: Path) -> None:
    setup = (
        "torch.backends.mps.is_available = lambda: True\n"
        "del torch.mps.set_per_process_memory_fraction\n"
    )
    action, high, _, rest = _watched(project, setup)
    assert (action, high, rest) == (ENVIRONMENT, "0.77", "[] []")


def test_apply_before_import_torch_sets_the_environment_torch_then_reads(project: Path) -> None:
    code = (
        "import os, sys, mpsd\n"
        "r = mpsd.apply()\n"
        "assert 'torch' not in sys.modules\n"
        f"seen = os.environ['{HIGH_VAR}'], os.environ['{LOW_VAR}']\n"
        "import torch\n"
        "print(r.action, *seen)\n"
    )
    pytest.importorskip("torch")
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=project, capture_output=True, text=True, timeout=180
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [ENVIRONMENT, "0.77", "0.7"]


def test_import_mpsd_stays_light() -> None:
    heavy = "('torch', 'psutil', 'tomlkit')"
    code = f"import sys, mpsd; print(sorted(m for m in {heavy} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "[]"
