"""What a user sees while config.toml is invalid, or edited since the last decision, and when
limits.toml cannot give an opted-in directory its values (docs/file-formats.md, "While
config.toml is invalid")."""

from __future__ import annotations

import json
from pathlib import Path

from mpsd import limits, paths
from mpsd.env.decision import HIGH_VAR, LOW_VAR
from tests.conftest import run_mpsd

WIDE = {"COLUMNS": "400"}  # long temporary paths stay on their lines


def once() -> str:
    done = run_mpsd("daemon", "--once")
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    return done.stdout + done.stderr


def write_config(text: str) -> None:
    paths.config_dir().mkdir(parents=True, exist_ok=True)
    paths.config_file().write_text(text)


def status_line(label: str) -> str:
    text = run_mpsd("status", env=WIDE).stdout
    found = [line for line in text.splitlines() if line.startswith(label)]
    assert len(found) == 1, text
    return found[0]


def test_once_with_a_typo_never_raises_the_ratio_and_status_and_doctor_say_so() -> None:
    write_config("headroom = 0.5\n")
    once()
    before = limits.read()
    assert before is not None and before.headroom == 0.5
    write_config("headroom = 0.5\nheadrom = 0.9\n")
    out = once()
    assert "unknown key 'headrom'" in out
    assert f"never above high {before.high_watermark_ratio:.2f}" in out
    after = limits.read()
    assert after is not None
    assert after.high_watermark_ratio <= before.high_watermark_ratio
    meanwhile = "the daemon keeps running, with ratios never above those limits.toml held"
    line = status_line("config:")
    assert "config.toml is invalid" in line and meanwhile in line
    facts = json.loads(run_mpsd("status", "--json").stdout)
    assert facts["config_in_force"]["from"] is None and facts["limits_held"] is True
    assert "unknown key 'headrom'" in facts["config_problem"]
    doctor = run_mpsd("doctor", env=WIDE)
    assert doctor.returncode == 1 and f"meanwhile {meanwhile}" in doctor.stdout
    # Fixed: the next run works the limits out with the file's values again.
    write_config("headroom = 0.4\n")
    once()
    assert limits.read().headroom == 0.4  # type: ignore[union-attr]
    assert "config:" not in run_mpsd("status").stdout


def test_status_says_when_config_toml_was_edited_since_the_last_decision() -> None:
    once()
    assert "config:" not in run_mpsd("status").stdout
    write_config('headroom = 0.7\nwindow = "2d"\n')
    line = status_line("config:")
    assert line == (
        "config:          config.toml was edited since these limits were worked out "
        "(headroom 0.8 -> 0.7, window 7d -> 2d): the daemon applies the new values at its "
        "next sample; no daemon is running: `mpsd daemon --once` applies them now"
    )
    facts = json.loads(run_mpsd("status", "--json").stdout)
    assert facts["config_changed"] == ["headroom 0.8 -> 0.7", "window 7d -> 2d"]
    once()
    assert "config:" not in run_mpsd("status").stdout
    assert json.loads(run_mpsd("status", "--json").stdout)["config_changed"] == []


def opted_in_by_config(tmp_path: Path) -> Path:
    project = (tmp_path / "proj").resolve()
    project.mkdir()
    assert run_mpsd("enable", str(project)).returncode == 0
    return project


def test_an_opted_in_directory_with_an_unreadable_limits_toml_is_said_to_be_opted_in(
    tmp_path: Path,
) -> None:
    project = opted_in_by_config(tmp_path)
    paths.limits_file().write_text("garbage\n")
    text = run_mpsd("status", cwd=project, env=WIDE).stdout
    assert f"this directory:  opted in (project {project}, listed in config.toml)" in text
    assert (
        "python here:     gets neither variable while limits.toml is unreadable "
        "(run `mpsd daemon --once` to rewrite it)"
    ) in text
    assert "not opted in" not in text and "mpsd enable" not in text
    data = json.loads(run_mpsd("env", "--shell", "json", cwd=project).stdout)
    assert data["opted_in"] is True and data["in_limits"] is False
    assert data["project"] == str(project)
    assert data["export"] == {}
    assert data["reason"] == (
        f"config.toml opts this directory in (project {project}), but limits.toml is "
        "unreadable, so nothing is exported: run `mpsd daemon --once` to rewrite it"
    )
    doctor = run_mpsd("doctor", cwd=project, env=WIDE).stdout
    hook = [line for line in doctor.splitlines() if "hook active" in line]
    assert hook and f"{project} is opted in (config.toml lists the project" in hook[0]
    assert "limits.toml is unreadable, so the hook exports nothing here" in hook[0]
    # The fix it names works.
    once()
    data = json.loads(run_mpsd("env", "--shell", "json", cwd=project).stdout)
    assert data["in_limits"] is True and set(data["export"]) == {HIGH_VAR, LOW_VAR}
    assert "listed in config.toml" not in run_mpsd("status", cwd=project, env=WIDE).stdout


def test_a_project_config_toml_lists_before_limits_toml_does_is_said_to_be_pending(
    tmp_path: Path,
) -> None:
    project = opted_in_by_config(tmp_path)
    other = (tmp_path / "other").resolve()
    other.mkdir()
    write_config(f'projects = ["{project}", "{other}"]\n')  # by hand, no daemon running
    data = json.loads(run_mpsd("env", "--shell", "json", cwd=other).stdout)
    assert data["opted_in"] is True and data["in_limits"] is False
    assert "limits.toml does not list it yet" in data["reason"]
    assert "`mpsd daemon --once` does it now" in data["reason"]
    once()
    data = json.loads(run_mpsd("env", "--shell", "json", cwd=other).stdout)
    assert data["in_limits"] is True and data["export"]
