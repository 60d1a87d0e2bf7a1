"""The opt-in facts `mpsd status` shows: opted in?, what a python here gets, set by hand?"""

from __future__ import annotations

from pathlib import Path

import pytest

from mpsd.env.decision import HIGH_VAR, LOW_VAR, MARK_HIGH, MARK_LOW
from mpsd.env.here import optin_facts, render_optin
from tests.integration.shells import opted_in_project


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return opted_in_project(tmp_path)


def test_inside_a_project_a_python_from_a_hooked_shell_gets_both(project: Path) -> None:
    hooked = {HIGH_VAR: "0.77", LOW_VAR: "0.7", MARK_HIGH: "0.77", MARK_LOW: "0.7"}
    facts = optin_facts(str(project / "src"), hooked)
    assert facts["opted_in"] is True and facts["project"] == str(project)
    assert facts["python_gets"] == {HIGH_VAR: "0.77", LOW_VAR: "0.7"}
    assert facts["hand_set"] == [] and facts["hook_here"] is True
    lines = render_optin(facts)
    assert lines[0] == f"this directory:  opted in (project {project})"
    assert lines[1] == f"python here:     gets {HIGH_VAR}=0.77, {LOW_VAR}=0.7"


def test_inside_a_project_a_shell_without_the_hook_is_told_so(project: Path) -> None:
    facts = optin_facts(str(project / "src"), {})
    assert facts["hook_here"] is False
    lines = render_optin(facts)
    assert (
        lines[1]
        == "python here:     gets neither variable from this shell: it has no mpsd hook yet"
    )
    assert lines[2].startswith(
        f"new terminal:    a python here gets {HIGH_VAR}=0.77, {LOW_VAR}=0.7 (open one"
    )


def test_outside_nothing_and_a_hint(project: Path, tmp_path: Path) -> None:
    facts = optin_facts(str(tmp_path), {})
    assert facts["opted_in"] is False
    assert render_optin(facts) == [
        "this directory:  not opted in (run `mpsd enable` to opt it in)",
        "python here:     gets neither variable (PyTorch's defaults)",
    ]


def test_values_set_by_hand_are_reported_and_win(project: Path) -> None:
    env = {HIGH_VAR: "1.2"}
    facts = optin_facts(str(project), env)
    assert facts["hand_set"] == [HIGH_VAR]
    assert facts["python_gets"] == {HIGH_VAR: "1.2", LOW_VAR: None}
    assert any("set by hand" in line for line in render_optin(facts))


def test_values_the_hook_exported_are_not_called_hand_set(project: Path) -> None:
    env = {HIGH_VAR: "0.77", LOW_VAR: "0.7", MARK_HIGH: "0.77", MARK_LOW: "0.7"}
    facts = optin_facts(str(project), env)
    assert facts["hand_set"] == [] and facts["set_by_hook"] == [HIGH_VAR, LOW_VAR]


def test_a_missing_limits_file_is_in_the_facts(tmp_path: Path) -> None:
    facts = optin_facts(str(tmp_path), {})
    assert facts["limits_found"] is False and facts["python_gets"] == {
        HIGH_VAR: None,
        LOW_VAR: None,
    }


def test_mpsd_status_shows_the_opt_in_facts(project: Path) -> None:
    from tests.conftest import run_mpsd

    # Wide enough that the long temporary path stays on its line.
    result = run_mpsd("status", cwd=project / "src", env={LOW_VAR: "0.5", "COLUMNS": "400"})
    assert result.returncode == 0, result.stderr
    assert f"this directory:  opted in (project {project})" in result.stdout
    assert f"python here:     gets {HIGH_VAR}=(unset), {LOW_VAR}=0.5" in result.stdout
    assert f"set by hand:     {LOW_VAR}" in result.stdout
    import json

    data = json.loads(run_mpsd("status", "--json", cwd=project).stdout)
    assert data["here"]["opted_in"] is True
    assert data["here"]["python_gets"] == {HIGH_VAR: "0.77", LOW_VAR: "0.7"}
