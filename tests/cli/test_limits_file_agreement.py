"""A limits.toml the hooks read differently from TOML: every command tells the same truth.

A hand edit that TOML accepts (a trailing `# note` on a ratio line) makes the hooks export
nothing. status, env and doctor must all say so, rather than show a ratio nobody gets.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from mpsd import limits, paths
from tests.conftest import run_mpsd
from tests.installkit import sample_limits


def _hand_edited(project: Path) -> None:
    """``project`` opted in, then limits.toml edited by hand (a comment on the ratio line)."""
    assert run_mpsd("enable", str(project)).returncode == 0
    limits.write(sample_limits(projects=(str(project.resolve()),)))
    path = paths.limits_file()
    text = path.read_text().replace(
        "high_watermark_ratio = 0.77", "high_watermark_ratio = 0.77 # mine"
    )
    path.write_text(text)


def test_status_says_unreadable_and_that_python_gets_nothing(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    _hand_edited(project)
    done = run_mpsd("status", cwd=project)
    assert done.returncode == 0, done.stderr
    assert "limits:          unreadable (limits.toml is not in mpsd's form: line 1" in done.stdout
    assert "gets neither variable" in done.stdout
    assert "ratio:" not in done.stdout
    facts = json.loads(run_mpsd("status", "--json", cwd=project).stdout)
    assert facts["high_watermark_ratio"] is None
    assert facts["limits_problem"].startswith("limits.toml is not in mpsd's form")
    assert facts["here"]["python_gets"] == {
        "PYTORCH_MPS_HIGH_WATERMARK_RATIO": None,
        "PYTORCH_MPS_LOW_WATERMARK_RATIO": None,
    }


def test_env_exports_nothing_and_says_why(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    _hand_edited(project)
    done = run_mpsd("env", "--shell", "json", cwd=project)
    data = json.loads(done.stdout)
    assert data["python_gets"] == {
        "PYTORCH_MPS_HIGH_WATERMARK_RATIO": None,
        "PYTORCH_MPS_LOW_WATERMARK_RATIO": None,
    }
    assert "not in mpsd's form" in data["reason"]


def test_doctor_names_the_problem_and_the_fix(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    _hand_edited(project)
    done = run_mpsd("doctor", "--json", cwd=project)
    assert done.returncode == 1
    check = next(c for c in json.loads(done.stdout)["checks"] if c["name"] == "limits")
    assert check["status"] == "problem"
    assert "line 1" in check["detail"] and "PyTorch runs uncapped" in check["detail"]
    assert "mpsd daemon --once" in check["fix"]


def test_the_daemon_rewrites_a_hand_edited_file_in_its_own_form(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    _hand_edited(project)
    done = run_mpsd("daemon", "--once")
    assert done.returncode == 0, done.stderr
    read = limits.read_file()
    assert read.problem is None and read.exports
    assert read.projects == (str(project.resolve()),)


def test_env_on_a_terminal_gives_the_reason_json_gives(tmp_path: Path) -> None:
    pexpect = pytest.importorskip("pexpect")
    project = tmp_path / "project"
    project.mkdir()
    assert run_mpsd("enable", "--no-python-hook", str(project)).returncode == 0
    paths.limits_file().write_text("high_watermark_ratio = 0.77 # mine\n")  # a hand-made one
    shown = pexpect.run(
        f"{sys.executable} -m mpsd env",
        cwd=str(project),
        env=dict(os.environ),
        timeout=60,
        encoding="utf-8",
    )
    reason = json.loads(run_mpsd("env", "--shell", "json", cwd=project).stdout)["reason"]
    assert reason.startswith("config.toml opts this directory in")
    assert f"# {reason}" in " ".join(shown.split())
