"""The shared decision (pure): what to export where, and what stays the user's."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mpsd.env.decision import (
    HIGH_VAR,
    LOW_VAR,
    MARK_HIGH,
    MARK_LOW,
    containing_project,
    decide_exports,
    hand_set,
)
from mpsd.limits import LimitsFile, parse_text, ratio_value
from tests.integration.shells import limits_text

PROJECT = "/Users/me/code/diffusion"
TEXT = parse_text(limits_text("0.77", "0.7", (PROJECT, "/Users/me/other")))


@pytest.mark.parametrize(
    ("text", "value"),
    [("0.77", 770_000_000), ("1", 10**9), ("2", 2 * 10**9), ("2.0", 2 * 10**9),
     ("0.01", 10_000_000), ("0.123456789", 123_456_789)],
)  # fmt: skip
def test_plain_decimals_in_range_are_ratios(text: str, value: int) -> None:
    assert ratio_value(text) == value


@pytest.mark.parametrize(
    "text",
    ["0", "0.0", "0.000000000", "2.5", "2.000000001", "3", "-0.5", "+0.5", ".5", "1.", "5e-1",
     "0x1", "nan", "inf", "", " 0.5", "0.5 ", "0,5", "$(id)", "`id`", "0.5; id", "1.0000000001",
     "٠.5", "0.５"],
)  # fmt: skip
def test_anything_else_is_no_ratio(text: str) -> None:
    assert ratio_value(text) is None


@given(st.text(max_size=12))
@settings(deadline=None, max_examples=200)
def test_an_accepted_ratio_is_always_a_safe_float_for_pytorch(text: str) -> None:
    value = ratio_value(text)
    if value is not None:
        assert 0 < float(text) <= 2
        assert set(text) <= set("0123456789.")


def test_the_view_takes_ratios_and_projects_as_the_hooks_do() -> None:
    view = TEXT
    assert (view.high, view.low) == ("0.77", "0.7")
    assert view.projects == (PROJECT, "/Users/me/other")


@pytest.mark.parametrize(("high", "low"), [("0.5", "0.6"), ("abc", "0.5"), ("0.5", "")])
def test_low_above_high_or_garbage_gives_no_ratios_but_keeps_projects(high: str, low: str) -> None:
    view = parse_text(limits_text(high, low, (PROJECT,)))
    assert not view.exports and view.projects == (PROJECT,)


def test_project_lines_with_quotes_backslashes_or_controls_are_ignored() -> None:
    text = limits_text(projects=('/a\\"; rm -rf ~; \\"', "/b\x07", "relative", PROJECT))
    assert parse_text(text).projects == (PROJECT,)


def test_a_project_holds_itself_and_below_but_not_a_prefix_sibling() -> None:
    projects = [PROJECT, PROJECT + "/src/inner"]
    assert containing_project(PROJECT, projects) == PROJECT
    assert containing_project(PROJECT + "/src", projects) == PROJECT
    assert containing_project(PROJECT + "/src/inner/x", projects) == PROJECT + "/src/inner"
    assert containing_project(PROJECT + "-old", projects) is None
    assert containing_project("/Users/me/code", projects) is None
    assert containing_project("/anything", ["/"]) == "/"


def test_a_value_differing_from_what_mpsd_exported_is_set_by_hand() -> None:
    assert hand_set({}) == ()
    assert hand_set({HIGH_VAR: "0.5"}) == (HIGH_VAR,)
    assert hand_set({HIGH_VAR: "0.5", MARK_HIGH: "0.5", LOW_VAR: "0.4", MARK_LOW: "0.5"}) == (
        LOW_VAR,
    )


def test_inside_a_project_both_are_exported() -> None:
    decision = decide_exports(TEXT, PROJECT + "/src", {})
    assert decision.project == PROJECT
    assert decision.exports == {HIGH_VAR: "0.77", LOW_VAR: "0.7"}
    after = decision.environment_after({})
    assert after == {HIGH_VAR: "0.77", LOW_VAR: "0.7", MARK_HIGH: "0.77", MARK_LOW: "0.7"}
    assert decision.python_gets({}) == {HIGH_VAR: "0.77", LOW_VAR: "0.7"}


def test_outside_what_mpsd_exported_is_taken_back() -> None:
    env = {HIGH_VAR: "0.77", LOW_VAR: "0.7", MARK_HIGH: "0.77", MARK_LOW: "0.7", "X": "1"}
    decision = decide_exports(TEXT, "/Users/me/code/diffusion-old", env)
    assert decision.project is None and decision.exports == {}
    assert decision.environment_after(env) == {"X": "1"}
    assert "mpsd enable" in decision.reason


def test_values_set_by_hand_stand_inside_and_outside() -> None:
    env = {HIGH_VAR: "0.5"}
    for directory in (PROJECT, "/elsewhere"):
        decision = decide_exports(TEXT, directory, env)
        assert decision.hand_set == (HIGH_VAR,)
        assert decision.environment_after(env) == env
        assert "by hand" in decision.reason


def test_anywhere_applies_outside_projects_but_not_over_the_users_values() -> None:
    assert decide_exports(TEXT, "/tmp", {}, anywhere=True).exports == {
        HIGH_VAR: "0.77",
        LOW_VAR: "0.7",
    }
    assert decide_exports(TEXT, "/tmp", {LOW_VAR: "1"}, anywhere=True).exports == {}


def test_no_file_or_a_broken_one_exports_nothing_and_says_why() -> None:
    assert "no limits.toml" in decide_exports(LimitsFile(found=False), PROJECT, {}).reason
    broken = decide_exports(parse_text(limits_text("0.5", "0.9", (PROJECT,))), PROJECT, {})
    assert broken.exports == {} and "nothing is exported" in broken.reason
