from __future__ import annotations

import datetime as dt
import json
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mpsd.limits import Limits
from mpsd.probe import verdict as pv
from mpsd.probe.verdict import ProbeResult
from tests.fixture_files import oom_messages

GIB = 1 << 30
MIB = 1 << 20
OOM_TEXT = (
    "RuntimeError: MPS backend out of memory (MPS allocated: 29.50 GiB, other allocations: "
    "448.00 KiB, max allowed: 29.95 GiB). Tried to allocate 512.00 MiB on shared pool. Use "
    "PYTORCH_MPS_HIGH_WATERMARK_RATIO=0.0 to disable upper limit for memory allocations (may "
    "cause system failure)."
)


def _current(ratio: float, headroom: float, recommended: int = int(37.44 * GIB)) -> Limits:
    """limits.toml as the daemon writes it for ``ratio`` at ``headroom`` (no penalty)."""
    return Limits(
        high_watermark_ratio=ratio,
        low_watermark_ratio=ratio,
        limit_bytes=int(ratio * recommended),
        recommended_max_bytes=recommended,
        recommended_max_source="torch",
        baseline_free_bytes=int(ratio * recommended / headroom),
        headroom=headroom,
        updated_at=dt.datetime(2026, 11, 30, 5, 0, tzinfo=dt.timezone.utc),
    )


def _clean() -> ProbeResult:
    return ProbeResult(
        high=0.8,
        low=0.8,
        step_bytes=512 * MIB,
        outcome=pv.OOM,
        steps=59,
        allocated_bytes=int(29.5 * GIB),
        recommended_max_bytes=int(37.44 * GIB),
        max_allowed_bytes=int(29.95 * GIB),
        message=OOM_TEXT,
        oom=pv.parse_oom(OOM_TEXT),
        swapouts_before=100,
        swapouts_after=100,
        pressure_max=1,
    )


def _swapped() -> ProbeResult:
    return ProbeResult(
        high=1.0,
        low=1.0,
        step_bytes=512 * MIB,
        outcome=pv.SWAPPED,
        steps=48,
        allocated_bytes=24 * GIB,
        recommended_max_bytes=int(37.44 * GIB),
        max_allowed_bytes=int(37.44 * GIB),
        swapouts_before=100,
        swapouts_after=5000,
        pressure_max=2,
    )


def test_every_recorded_mps_oom_message_gives_its_numbers() -> None:
    rows = oom_messages()
    checked = 0
    for row in rows:
        expected = row["expected"]
        if expected.get("kind") != "mps_oom":
            continue
        found = pv.parse_oom(row["text"])
        assert found is not None, row["id"]
        for key in ("allocated_bytes", "other_bytes", "max_allowed_bytes", "requested_bytes"):
            if key in expected:
                assert found[key] == expected[key], (row["id"], key)
        checked += 1
    assert checked >= 20


def test_the_report_shows_a_ratio_with_every_decimal_it_has() -> None:
    result = replace(_clean(), high=0.805, low=0.8, max_allowed_bytes=int(0.805 * 37.44 * GIB))
    text = "\n".join(pv.report_lines(result, pv.advise(result, _current(0.8, 0.8))))
    assert text.startswith("Probe: ratio 0.805 (low 0.80), steps of")
    assert "(0.805 x 37.44 GiB recommended max)" in text  # not 0.81: that is another cap


def test_text_without_an_mps_oom_gives_nothing() -> None:
    assert pv.parse_oom("CUDA out of memory. Tried to allocate 2.00 GiB") is None


def test_a_clean_error_with_no_swap_is_clean_and_says_all_good() -> None:
    result = _clean()
    advice = pv.advise(result, _current(0.8, 0.8))
    assert result.verdict == pv.CLEAN
    assert result.error_at_bytes == int(29.5 * GIB) + 448 * 1024
    assert advice.config_line is None
    assert advice.text.startswith("All good")
    text = "\n".join(pv.report_lines(result, advice))
    assert "Clean error at 29.50 GiB held, max allowed 29.95 GiB (0.80 x 37.44 GiB" in text
    assert "Swap-outs during the run: 0" in text
    assert "Verdict: clean." in text


def test_a_clean_error_at_the_first_step_or_without_a_swap_watch_is_not_all_good() -> None:
    result = _clean()
    result.steps = 0
    assert "smaller `--step`" in pv.advise(result, _current(0.8, 0.8)).text
    result = _clean()
    result.swapouts_before = result.swapouts_after = None
    assert result.verdict == pv.CLEAN
    assert "swap could not be watched" in pv.advise(result, _current(0.8, 0.8)).text


def test_swap_during_a_run_that_ended_cleanly_still_counts_as_swapped() -> None:
    result = _clean()
    result.swapouts_after = 101
    assert result.verdict == pv.SWAPPED


def test_a_swapped_run_gives_the_exact_headroom_line_to_put_in_config() -> None:
    result = _swapped()
    advice = pv.advise(result, _current(1.0, 0.8))
    # swap began at 24 of 37.44 GiB: a ratio below 1.0 x 24/37.44 x 0.95 = 0.60, headroom 0.48
    assert advice.ratio == 0.6
    assert advice.config_line == "headroom = 0.48"
    assert "`headroom = 0.48` in config.toml" in advice.text
    assert "mpsd probe --calibrate" in advice.text
    text = "\n".join(pv.report_lines(result, advice))
    assert "The Mac swapped at 24.00 GiB allocated" in text
    assert "Swap-outs during the run: 4900 (peak pressure: warning)." in text
    assert "Verdict: swapped." in text


def test_without_a_recommendation_a_swapped_run_suggests_a_lower_ratio() -> None:
    advice = pv.advise(_swapped(), None)
    assert advice.config_line is None
    assert "mpsd probe --ratio 0.60" in advice.text


def test_pressure_at_warning_and_never_reaching_the_limit_have_their_own_verdicts() -> None:
    from mpsd.probe.runner import _must_stop

    result = _swapped()
    result.outcome, result.swapouts_after, result.pressure_max = "", None, 1
    assert _must_stop(lambda: (100, 2), result)  # warning comes before the compressor swaps
    assert result.verdict == pv.PRESSURE
    assert "memory pressure reached warning" in pv.advise(result, _current(1.0, 0.8)).text
    never = ProbeResult(0.8, 0.8, MIB, outcome=pv.NEVER_REACHED, allocated_bytes=GIB)
    assert never.verdict == pv.NEVER_REACHED
    assert "not in force" in pv.advise(never, _current(0.8, 0.8)).text
    assert never.swapouts is None
    assert "unknown" in "\n".join(pv.report_lines(never, pv.advise(never, _current(0.8, 0.8))))


def test_json_holds_the_same_facts_as_the_text() -> None:
    result = _swapped()
    data = pv.to_json(result, pv.advise(result, _current(1.0, 0.8)))
    assert (data["verdict"], data["swapouts"]) == ("swapped", 4900)
    assert data["config_line"] == "headroom = 0.48"
    assert json.loads(json.dumps(data)) == data
    result = _clean()
    data = pv.to_json(result, pv.advise(result, _current(0.8, 0.8)))
    assert data["verdict"] == "clean"
    assert data["error_at_bytes"] == int(29.5 * GIB) + 448 * 1024
    assert data["max_allowed_bytes"] == int(29.95 * GIB)
    assert data["swapouts"] == 0
    assert data["oom"]["requested_bytes"] == 512 * MIB
    assert data["oom"]["pool"] == "shared"
    assert data["message"] == OOM_TEXT
    assert data["config_line"] is None


def test_the_max_allowed_comes_from_the_message_when_torch_could_not_say() -> None:
    result = ProbeResult(0.8, 0.8, 512 * MIB)
    result.note_oom(OOM_TEXT)
    assert result.max_allowed_bytes == pv.parse_oom(OOM_TEXT)["max_allowed_bytes"]  # type: ignore[index]


def test_headroom_is_the_clean_ratio_of_the_recommended_max_over_the_baseline() -> None:
    assert (
        pv.headroom_for(0.8, baseline_free_bytes=50 * GIB, recommended_max_bytes=40 * GIB) == 0.64
    )
    assert pv.headroom_for(0.7, baseline_free_bytes=35 * GIB, recommended_max_bytes=40 * GIB) == 0.8
    assert pv.headroom_for(1.5, baseline_free_bytes=GIB, recommended_max_bytes=40 * GIB) == 1.0
    with pytest.raises(ValueError):
        pv.headroom_for(0.7, 0, 40 * GIB)


@settings(deadline=None, max_examples=150)
@given(
    ratio=st.floats(0.1, 2.0),
    baseline=st.integers(GIB // 4, 192 * GIB),
    recommended=st.integers(GIB, 160 * GIB),
)
def test_the_headroom_written_is_valid_and_never_gives_more_than_the_clean_ratio(
    ratio: float, baseline: int, recommended: int
) -> None:
    from mpsd.config import validate

    value = pv.headroom_for(ratio, baseline, recommended)
    assert 0 < value <= 1
    validate({"headroom": value}, Path("config.toml"))
    if value > 0.01:  # above the smallest headroom config.toml takes
        assert value * baseline / recommended <= ratio + 1e-6


def test_a_child_that_ends_without_a_verdict_is_one_sentence_saying_why() -> None:
    from mpsd.errors import MpsdError
    from mpsd.probe.runner import _child_failed

    result = ProbeResult(0.5, 0.5, 2 * MIB, python="/v/python")
    result.steps, result.allocated_bytes = 2, 4 * MIB
    with pytest.raises(MpsdError) as crash:
        _child_failed(-11, None, result, "Fatal Python error: Segmentation fault")
    assert str(crash.value).startswith("the probe's child (/v/python) killed by SIGSEGV after 2 ")
    assert "(4.00 MiB allocated)" in str(crash.value) and crash.value.exit_code == 2
    assert "its last words: Fatal Python error" in str(crash.value)
    no_mps = {"event": "error", "kind": "no_mps", "torch": "2.13.0+cpu"}
    with pytest.raises(MpsdError, match=r"MPS needs an Apple Silicon Mac with macOS 12\.3\+"):
        _child_failed(4, no_mps, result, "")


def test_a_stop_is_judged_by_what_the_driver_held_when_rounding_put_it_ahead() -> None:
    """PyTorch rounds large allocations up (up to ~3%): the safe ratio stays below what the
    child really held."""
    result = ProbeResult(high=1.0, low=1.0, step_bytes=MIB, outcome=pv.SWAPPED)
    result.max_allowed_bytes, result.allocated_bytes = 40 * MIB, 20 * MIB
    assert pv.safe_ratio(result) == 0.47  # 20/40 x 0.95
    result.driver_bytes = 20 * MIB + 600 * 1024
    assert pv.safe_ratio(result) == 0.48  # 20.59/40 x 0.95 = 0.489
