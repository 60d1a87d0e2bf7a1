"""What a python here gets (`mpsd.env.exports.optin`), and the lines `mpsd status` shows of it:
opted in?, what a python here gets, set by hand?"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mpsd.env.decision import HIGH_VAR, LOW_VAR, MARK_HIGH, MARK_LOW
from mpsd.env.exports import exports_here, optin
from tests.conftest import run_mpsd
from tests.integration.shells import opted_in_project

HOOKED = {HIGH_VAR: "0.77", LOW_VAR: "0.7", MARK_HIGH: "0.77", MARK_LOW: "0.7"}


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return opted_in_project(tmp_path)


def _optin(directory: Path, env: dict[str, str]):  # type: ignore[no-untyped-def]
    return optin(exports_here(str(directory), env), env)


def test_inside_a_project_a_python_from_a_hooked_shell_gets_both(project: Path) -> None:
    here = _optin(project / "src", HOOKED)
    assert here.opted_in is True and here.project == str(project)
    assert here.python_gets == {HIGH_VAR: "0.77", LOW_VAR: "0.7"}
    assert here.hand_set == [] and here.hook_here is True
    out = run_mpsd("status", cwd=project / "src", env={**HOOKED, "COLUMNS": "400"}).stdout
    assert f"this directory:  opted in (project {project})\n" in out
    assert f"python here:     gets {HIGH_VAR}=0.77, {LOW_VAR}=0.7\n" in out


def test_inside_a_project_a_shell_without_the_hook_is_told_so(project: Path) -> None:
    assert _optin(project / "src", {}).hook_here is False
    out = run_mpsd("status", cwd=project / "src", env={"COLUMNS": "400"}).stdout
    assert "python here:     gets neither variable from this shell: it has no mpsd hook yet" in out
    assert f"new terminal:    a python here gets {HIGH_VAR}=0.77, {LOW_VAR}=0.7 (open one" in out


def test_outside_nothing_and_a_hint(project: Path, tmp_path: Path) -> None:
    assert _optin(tmp_path, {}).opted_in is False
    out = run_mpsd("status", cwd=tmp_path).stdout
    assert "this directory:  not opted in (run `mpsd enable` to opt it in)\n" in out
    assert "python here:     gets neither variable (PyTorch's defaults)\n" in out


def test_values_set_by_hand_are_reported_and_win(project: Path) -> None:
    here = _optin(project, {HIGH_VAR: "1.2"})
    assert here.hand_set == [HIGH_VAR]
    assert here.python_gets == {HIGH_VAR: "1.2", LOW_VAR: None}
    assert _optin(project, HOOKED).hand_set == []  # what the hook exported is not by hand
    # Wide enough that the long temporary path stays on its line.
    result = run_mpsd("status", cwd=project / "src", env={LOW_VAR: "0.5", "COLUMNS": "400"})
    assert result.returncode == 0, result.stderr
    assert f"this directory:  opted in (project {project})" in result.stdout
    assert f"python here:     gets {HIGH_VAR}=(unset), {LOW_VAR}=0.5" in result.stdout
    assert f"set by hand:     {LOW_VAR}" in result.stdout


def test_a_missing_limits_file_is_in_the_facts(tmp_path: Path) -> None:
    here = _optin(tmp_path, {})
    assert here.limits_found is False
    assert here.python_gets == {HIGH_VAR: None, LOW_VAR: None}


def test_mpsd_status_json_shows_the_opt_in_facts(project: Path) -> None:
    data = json.loads(run_mpsd("status", "--json", cwd=project).stdout)
    assert data["here"]["opted_in"] is True
    assert data["here"]["python_gets"] == {HIGH_VAR: "0.77", LOW_VAR: "0.7"}
