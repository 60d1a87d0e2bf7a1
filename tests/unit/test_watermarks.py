"""Which hand-set watermark variables PyTorch would reject or misread."""

from __future__ import annotations

import pytest

from mpsd.env.watermarks import HIGH, LOW, problems


def test_both_unset_is_fine() -> None:
    assert problems({}) == []


@pytest.mark.parametrize(
    ("high", "low"),
    [("0.77", "0.77"), ("1.0", "0.5"), ("2", "2.0"), ("1e0", "5e-1"), (" 0.7 ", "+0.7")],
)
def test_plain_consistent_values_are_fine(high: str, low: str) -> None:
    assert problems({HIGH: high, LOW: low}) == []


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({HIGH: "0.8"}, "PYTORCH_MPS_LOW_WATERMARK_RATIO is not set while the other one is"),
        ({HIGH: "0.8"}, "PyTorch stops with 'invalid low watermark ratio 1.4'"),
        ({LOW: "0.8"}, "PYTORCH_MPS_HIGH_WATERMARK_RATIO is not set"),
        ({HIGH: "0.0", LOW: "0.0"}, "=0.0 removes the memory cap"),
        ({HIGH: "0,8", LOW: "0,8"}, "'0,8' has text after the number: PyTorch reads 0;"),
        ({HIGH: "abc", LOW: "0.8"}, "is not a plain number: PyTorch reads it as 0.0"),
        ({HIGH: "", LOW: ""}, "is not a plain number"),
        ({HIGH: "nan", LOW: "0.5"}, "'nan' is not a finite number: PyTorch rejects it"),
        ({HIGH: "-0.5", LOW: "-0.5"}, "'-0.5' is below 0: PyTorch rejects it"),
        ({HIGH: "0.8x", LOW: "0.8"}, "'0.8x' has text after the number: PyTorch reads 0.8"),
        ({HIGH: "2.5", LOW: "1.0"}, "is above 2.0: PyTorch rejects it"),
        ({HIGH: "0.5", LOW: "0.8"}, "'invalid low watermark ratio'"),
    ],
)
def test_each_bad_setting_is_named(env: dict[str, str], expected: str) -> None:
    assert any(expected in problem for problem in problems(env)), problems(env)
