from __future__ import annotations

from pathlib import Path

import pytest

from mpsd.commands.probe import set_headroom
from mpsd.config import ConfigError, load_config
from mpsd.probe import verdict as pv
from mpsd.probe.verdict import calibrate


def _run_swapping_above(
    threshold: float, outcome_below: str = pv.OOM
) -> tuple[list[float], object]:
    tried: list[float] = []

    def run(ratio: float) -> pv.ProbeResult:
        tried.append(ratio)
        swapped = ratio > threshold
        return pv.ProbeResult(
            high=ratio,
            low=ratio,
            step_bytes=1,
            outcome=pv.SWAPPED if swapped else outcome_below,
            swapouts_before=0,
            swapouts_after=10 if swapped else 0,
        )

    return tried, run


def test_calibration_steps_down_while_runs_swap_and_stops_at_the_first_clean_one() -> None:
    tried, run = _run_swapping_above(0.82)
    found = calibrate(1.0, run)  # type: ignore[arg-type]
    assert tried == [1.0, 0.95, 0.9, 0.85, 0.8]
    assert found.clean_ratio == 0.8
    assert found.changed
    assert found.stopped is None


def test_a_clean_first_run_changes_nothing() -> None:
    tried, run = _run_swapping_above(2.0)
    found = calibrate(0.8, run)  # type: ignore[arg-type]
    assert tried == [0.8]
    assert found.clean_ratio == 0.8
    assert not found.changed


def test_calibration_gives_up_below_the_floor() -> None:
    tried, run = _run_swapping_above(0.0)
    found = calibrate(0.3, run)  # type: ignore[arg-type]
    assert tried == [0.3, 0.25, 0.2, 0.15, 0.1]
    assert found.clean_ratio is None
    assert found.stopped is not None and "quit the biggest apps" in found.stopped


def test_calibration_stops_when_pytorch_never_raises() -> None:
    tried, run = _run_swapping_above(0.9, outcome_below=pv.NEVER_REACHED)
    found = calibrate(1.0, run)  # type: ignore[arg-type]
    assert tried == [1.0, 0.95, 0.9]
    assert found.clean_ratio is None
    assert found.stopped is not None and "never raised" in found.stopped


def test_setting_headroom_keeps_the_users_comments_and_other_keys(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text(
        "# my settings\n"
        "headroom = 0.8  # what the daemon gives MPS\n"
        "\n"
        "# sample often\n"
        'interval = "10s"\n'
        'projects = ["/Users/me/code"]\n'
    )
    set_headroom(path, 0.72)
    text = path.read_text()
    assert text == (
        "# my settings\n"
        "headroom = 0.72  # what the daemon gives MPS\n"
        "\n"
        "# sample often\n"
        'interval = "10s"\n'
        'projects = ["/Users/me/code"]\n'
    )
    config = load_config(path)
    assert (
        config.headroom == 0.72 and config.interval == 10 and config.projects == ("/Users/me/code",)
    )


def test_setting_headroom_adds_the_key_when_only_a_comment_mentions_it(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text("# headroom = 0.8\ninterval = 30\n")
    set_headroom(path, 0.6)
    assert path.read_text().startswith("# headroom = 0.8\ninterval = 30\n")
    assert load_config(path).headroom == 0.6


def test_setting_headroom_creates_a_missing_config(tmp_path: Path) -> None:
    path = tmp_path / "mps" / "config.toml"
    set_headroom(path, 0.7)
    assert load_config(path).headroom == 0.7


@pytest.mark.parametrize(
    ("text", "problem"),
    [("headroom = [\n", "not valid TOML"), ("colour = 'red'\n", "unknown key 'colour'")],
)
def test_a_broken_config_is_reported_and_left_untouched(
    tmp_path: Path, text: str, problem: str
) -> None:
    path = tmp_path / "config.toml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=problem):
        set_headroom(path, 0.7)
    assert path.read_text() == text


def test_a_config_that_cannot_be_written_is_one_sentence_and_left_untouched(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import mpsd.atomic
    from mpsd.errors import MpsdError

    def read_only(path: Path, data: bytes, mode: int | None = None, **kw: object) -> bool:
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(mpsd.atomic, "write_atomic", read_only)
    path = tmp_path / "config.toml"
    path.write_text("interval = 30\n")
    with pytest.raises(MpsdError, match=r"cannot be written \(Permission denied\)"):
        set_headroom(path, 0.7)
    assert path.read_text() == "interval = 30\n"
