from __future__ import annotations

import sys

import pytest

import mpsd
from mpsd.env.budget import BudgetError
from mpsd.env.watermarks import strtod

GIB = 1 << 30


@pytest.fixture
def fake_mps(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """torch's CPU build, with torch.mps answering as a 48 GB Mac's would."""
    torch = pytest.importorskip("torch")
    numbers = {"recommended": int(37.44 * GIB), "allocated": 10 * GIB, "driver": 11 * GIB}
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: True)
    monkeypatch.setattr(torch.mps, "recommended_max_memory", lambda: numbers["recommended"])
    monkeypatch.setattr(torch.mps, "current_allocated_memory", lambda: numbers["allocated"])
    monkeypatch.setattr(torch.mps, "driver_allocated_memory", lambda: numbers["driver"])
    return numbers


def test_budget_is_max_allowed_minus_what_the_driver_holds(
    fake_mps: dict[str, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYTORCH_MPS_HIGH_WATERMARK_RATIO", "0.8")
    assert mpsd.budget() == int(0.8 * fake_mps["recommended"]) - 11 * GIB


def test_budget_can_be_asked_twice_through_the_package(
    fake_mps: dict[str, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    # A submodule named mpsd/budget.py would replace the function after the first call.
    monkeypatch.setenv("PYTORCH_MPS_HIGH_WATERMARK_RATIO", "0.8")
    first = mpsd.budget()
    fake_mps["driver"] += GIB
    assert mpsd.budget() == first - GIB


def test_the_tensors_count_even_when_the_driver_reports_less(
    fake_mps: dict[str, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYTORCH_MPS_HIGH_WATERMARK_RATIO", "1.0")
    fake_mps["driver"] = GIB
    assert mpsd.budget() == fake_mps["recommended"] - 10 * GIB


def test_without_the_variable_pytorchs_default_of_1_7_is_in_force(fake_mps: dict[str, int]) -> None:
    assert mpsd.budget() == int(1.7 * fake_mps["recommended"]) - 11 * GIB


def test_an_explicit_ratio_wins_over_the_environment(
    fake_mps: dict[str, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYTORCH_MPS_HIGH_WATERMARK_RATIO", "1.5")
    assert mpsd.budget(ratio=0.5) == int(0.5 * fake_mps["recommended"]) - 11 * GIB


def test_the_budget_never_goes_below_zero(
    fake_mps: dict[str, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYTORCH_MPS_HIGH_WATERMARK_RATIO", "0.2")
    assert mpsd.budget() == 0


@pytest.mark.parametrize("value", ["0.0", "", "abc"])
def test_no_cap_in_force_is_an_error_not_a_number(
    fake_mps: dict[str, int], monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv("PYTORCH_MPS_HIGH_WATERMARK_RATIO", value)
    with pytest.raises(BudgetError, match="no cap"):
        mpsd.budget()


def test_the_ratio_is_read_as_pytorchs_strtod_reads_it() -> None:
    assert strtod("0.8") == 0.8
    assert strtod(" 0.75xyz") == 0.75
    assert strtod("1e-1") == 0.1
    assert strtod(".5") == 0.5
    assert strtod("garbage") == 0.0


def test_without_mps_the_error_says_what_mps_needs() -> None:
    pytest.importorskip("torch")  # the CPU build: MPS is not available
    with pytest.raises(BudgetError, match="Apple Silicon"):
        mpsd.budget()


def test_without_torch_the_error_says_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "torch", None)
    with pytest.raises(BudgetError, match="pip install torch"):
        mpsd.budget()
    assert isinstance(BudgetError("x"), RuntimeError)
