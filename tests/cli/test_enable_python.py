"""`mpsd enable --python` on interpreters that are not a project's venv: the operating system's
own Python is refused, a whole installation (pyenv's, Homebrew's) gets the hook with a warning,
and `mpsd disable --python` takes one interpreter's hook out again.

No test writes into a real system directory: a "system" Python is a stand-in interpreter whose
prefix lies in tmp_path, with ``pyhooks.SYSTEM_PREFIXES`` pointed there; the real
``/usr/bin/python3`` is only asked (``pyhooks.inspect_interpreter`` reads, never writes)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from mpsd.cli import main
from mpsd.env import pyhooks
from mpsd.errors import MpsdError


def standin_python(prefix: Path, site: Path, version: tuple[int, int] = (3, 11)) -> Path:
    """An executable ``prefix/bin/python3`` that answers mpsd's question as a base interpreter
    at ``prefix`` with the site-packages ``site`` would (and does nothing else)."""
    site.mkdir(parents=True, exist_ok=True)
    answer = json.dumps([list(version), str(site), str(prefix), str(prefix)])
    python = prefix / "bin" / "python3"
    python.parent.mkdir(parents=True, exist_ok=True)
    python.write_text(f"#!/bin/sh\ncat <<'EOF'\n{answer}\nEOF\n")
    python.chmod(0o755)
    return python


@pytest.fixture
def project(tmp_path: Path) -> Path:
    path = tmp_path / "proj"
    path.mkdir()
    return Path(os.path.realpath(path))


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_the_kind_of_a_prefix_follows_where_the_python_lives(tmp_path: Path) -> None:
    assert pyhooks.kind("/usr", "/usr") == pyhooks.SYSTEM  # Debian's /usr/bin/python3
    clt = "/Library/Developer/CommandLineTools/Library/Frameworks/Python3.framework/Versions/3.9"
    assert pyhooks.kind(clt, clt) == pyhooks.SYSTEM  # a fresh Mac's python3
    xcode = "/Applications/Xcode-beta.app/Contents/Developer/Library/Frameworks/Python3.framework"
    assert pyhooks.kind(xcode, xcode) == pyhooks.SYSTEM
    for installed in (
        "/usr/local/Cellar/python@3.12/3.12.4/Frameworks/Python.framework/Versions/3.12",
        "/opt/homebrew/opt/python@3.12/Frameworks/Python.framework/Versions/3.12",
        "/Library/Frameworks/Python.framework/Versions/3.12",  # python.org's installer
        str(tmp_path / ".pyenv" / "versions" / "3.11.9"),
    ):
        assert pyhooks.kind(installed, installed) == pyhooks.INSTALLATION, installed
    venv = tmp_path / "venv"
    venv.mkdir()
    (venv / "pyvenv.cfg").write_text("home = /usr/bin\n")
    assert pyhooks.kind(str(venv), "/usr") == pyhooks.VENV
    assert pyhooks.kind(str(venv), str(venv)) == pyhooks.VENV  # pyvenv.cfg alone says so
    conda = tmp_path / "miniconda3" / "envs" / "ml"
    (conda / "conda-meta").mkdir(parents=True)
    assert pyhooks.kind(str(conda), str(conda)) == pyhooks.CONDA


@pytest.mark.skipif(not os.path.isfile("/usr/bin/python3"), reason="no /usr/bin/python3 here")
def test_the_real_system_python_is_refused_when_asked(tmp_path: Path) -> None:
    done = subprocess.run(
        ["/usr/bin/python3", "-I", "-c", "import sys; print(sys.prefix == sys.base_prefix)"],
        capture_output=True,
        text=True,
        check=True,
    )
    if done.stdout.strip() != "True" or not os.path.realpath("/usr/bin/python3").startswith(
        "/usr/"
    ):
        pytest.skip("/usr/bin/python3 is not the distribution's own Python here")
    with pytest.raises(MpsdError) as caught:
        pyhooks.inspect_interpreter("/usr/bin/python3")
    assert "is the system's own Python" in str(caught.value)
    assert "`mpsd run -- python ...`" in str(caught.value)


def test_enable_refuses_the_systems_python_naming_its_site_packages_and_changes_nothing(
    tmp_path: Path,
    project: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Debian's layout: the python in /usr, its site-packages under /usr/local.
    usr = tmp_path / "system" / "usr"
    site = usr / "local" / "lib" / "python3.11" / "dist-packages"
    python = standin_python(usr, site)
    monkeypatch.setattr(pyhooks, "SYSTEM_PREFIXES", (str(usr),))
    monkeypatch.setattr(pyhooks, "NOT_SYSTEM_PREFIXES", (str(usr / "local"),))
    code, out, err = _run(capsys, "enable", str(project), "--python", str(python))
    assert code == 2
    assert err == (
        f"mpsd: {python} is the system's own Python 3.11 (its site-packages, {site}, serves "
        "every program of this machine that runs it), so mpsd puts no start-up hook there; "
        "use a virtual environment of your own (`python3 -m venv .venv` in the project), or "
        "start this one with `mpsd run -- python ...`.\n"
    )
    assert out == ""
    assert os.listdir(site) == []
    assert pyhooks.record() == []
    code, out, _ = _run(capsys, "projects", "--json")
    assert json.loads(out)["projects"] == []


def test_a_whole_installation_gets_the_hook_with_a_warning_and_disable_python_takes_it_out(
    tmp_path: Path, project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    prefix = tmp_path / "home" / ".pyenv" / "versions" / "3.11.9"
    site = prefix / "lib" / "python3.11" / "site-packages"
    python = standin_python(prefix, site)
    code, out, err = _run(capsys, "enable", str(project), "--python", str(python))
    assert code == 0, err
    # The directory written is named, not the prefix.
    assert f"Set up the start-up hook in {site} (Python 3.11)" in out
    assert err.startswith(
        f"warning: {site} is the site-packages of a whole Python installation ({prefix}), "
        "not of a virtual environment: every python 3.11 started from it gets the hook"
    )
    assert f"`mpsd disable {project} --python {python}`" in err
    assert pyhooks.has_copy(str(site))

    code, out, err = _run(capsys, "disable", str(project), "--python", str(python))
    assert code == 0, err
    assert f"Removed the start-up hook from {site} ({python})." in out
    assert f"{project} stays opted in" in out
    assert not pyhooks.has_copy(str(site)) and os.listdir(site) == []
    assert pyhooks.record() == []
    code, out, _ = _run(capsys, "projects", "--json")
    assert [p["path"] for p in json.loads(out)["projects"]] == [str(project)]

    code, out, err = _run(capsys, "disable", str(project), "--python", str(python))
    assert code == 1
    assert err == (
        f"mpsd: {python} has no start-up hook from mpsd for {project}; `mpsd projects` "
        "lists each project's.\n"
    )


def test_disable_python_takes_one_interpreter_out_and_leaves_the_others(
    tmp_path: Path, project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first = tmp_path / "envs" / "a"
    second = tmp_path / "envs" / "b"
    for env in (first, second):
        subprocess.run(
            [sys.executable, "-m", "venv", "--without-pip", str(env)],
            check=True,
            capture_output=True,
        )
    code, _, err = _run(
        capsys,
        "enable",
        str(project),
        "--python",
        str(first / "bin" / "python"),
        "--python",
        str(second / "bin" / "python"),
    )
    assert code == 0, err
    assert err == ""  # venvs: no warning
    sites = {Path(e.python).parent.parent: e.site for e in pyhooks.record()}
    assert set(sites) == {first, second}
    # Another name of the same environment's python does it too (python3 for python).
    code, out, err = _run(
        capsys, "disable", str(project), "--python", str(first / "bin" / "python3")
    )
    assert code == 0, err
    assert f"Removed the start-up hook from {sites[first]}" in out
    assert not pyhooks.has_copy(sites[first])
    assert pyhooks.has_copy(sites[second])
    assert [Path(e.python).parent.parent for e in pyhooks.record()] == [second]
    other = tmp_path / "other"
    other.mkdir()
    code, _, err = _run(capsys, "disable", str(other), "--python", str(second / "bin" / "python"))
    assert code == 1
    assert "`mpsd projects` lists each project's" in err
    assert pyhooks.has_copy(sites[second])


def test_a_python_listed_outside_the_project_is_not_run_again_and_disable_takes_it_out(
    tmp_path: Path,
    project: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    usr = tmp_path / "system" / "usr"
    site = usr / "lib" / "python3" / "dist-packages"
    python = standin_python(usr, site)
    # Set up before mpsd told the system's Python apart (the rule's inputs say: not system).
    monkeypatch.setattr(pyhooks, "SYSTEM_PREFIXES", ())
    assert _run(capsys, "enable", str(project), "--python", str(python))[0] == 0
    assert pyhooks.has_copy(str(site))
    monkeypatch.setattr(pyhooks, "SYSTEM_PREFIXES", (str(usr),))
    # SPEC: mpsd never runs a program a file in its dirs names (python-hooks.tsv lists it).
    monkeypatch.setattr(pyhooks, "inspect_interpreter", lambda python: pytest.fail(python))
    code, _, err = _run(capsys, "enable", str(project))
    assert code == 0 and str(python) not in err
    assert pyhooks.has_copy(str(site))
    assert _run(capsys, "disable", str(project), "--python", str(python))[0] == 0
    assert os.listdir(site) == []
