"""`mpsd enable`, `mpsd disable`, `mpsd projects`: as a user runs them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from mpsd import limits, paths
from mpsd._toml import tomllib
from tests.conftest import run_mpsd
from tests.integration.shells import limits_text

USER_CONFIG = """\
# my settings, keep them
headroom = 0.7   # less than the default

projects = [
    "/somewhere/else",  # the old one
]
# trailing note
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    path = tmp_path / "code" / "diffusion"
    (path / "src").mkdir(parents=True)
    return path.resolve()


def config_projects() -> list[str]:
    return list(tomllib.loads(paths.config_file().read_text())["projects"])


def test_enable_with_no_files_writes_a_commented_config_and_estimated_limits(
    project: Path,
) -> None:
    result = run_mpsd("enable", cwd=project)
    assert result.returncode == 0, result.stderr
    assert "Opted in" in result.stdout and str(project) in result.stdout
    text = paths.config_file().read_text()
    assert "# share of the baseline free memory" in text
    assert config_projects() == [str(project)]
    written = limits.read()
    assert written is not None
    assert written.projects == (str(project),)
    assert written.recommended_max_source in ("estimate", "torch", "metal", "iogpu")
    assert written.baseline_source == "estimate"
    assert 0 < written.low_watermark_ratio <= written.high_watermark_ratio <= 2
    assert written.headroom == 0.8
    # The one-path-a-line form the hooks read.
    assert f'projects = [\n    "{project}",\n]' in paths.limits_file().read_text()


def test_enable_keeps_the_users_comments_and_layout(project: Path) -> None:
    paths.config_file().parent.mkdir(parents=True)
    paths.config_file().write_text(USER_CONFIG)
    assert run_mpsd("enable", str(project)).returncode == 0
    text = paths.config_file().read_text()
    assert text.startswith("# my settings, keep them\nheadroom = 0.7   # less than the default\n")
    assert '"/somewhere/else",  # the old one' in text and text.endswith("# trailing note\n")
    assert config_projects() == ["/somewhere/else", str(project)]
    assert run_mpsd("disable", str(project)).returncode == 0
    assert paths.config_file().read_text() == USER_CONFIG


def test_enable_after_an_entry_with_a_comment_adds_a_real_entry(project: Path) -> None:
    # tomlkit appends after a same-line comment, into the comment, unless told otherwise.
    text = '# mine\nprojects = [ "/somewhere/else", # the old one\n]\n'
    paths.config_file().parent.mkdir(parents=True)
    paths.config_file().write_text(text)
    assert run_mpsd("enable", str(project)).returncode == 0
    assert config_projects() == ["/somewhere/else", str(project)]
    assert "# the old one" in paths.config_file().read_text()


def test_enable_only_replaces_the_projects_of_existing_limits(project: Path) -> None:
    paths.config_dir().mkdir(parents=True)
    paths.limits_file().write_text(limits_text("0.61", "0.55", ()))
    before = tomllib.loads(paths.limits_file().read_text())
    assert run_mpsd("enable", str(project)).returncode == 0
    after = tomllib.loads(paths.limits_file().read_text())
    assert after.pop("projects") == [str(project)]
    before.pop("projects")
    assert after == before
    assert run_mpsd("disable", str(project)).returncode == 0
    assert tomllib.loads(paths.limits_file().read_text())["projects"] == []


def test_paths_are_stored_physical(project: Path, tmp_path: Path) -> None:
    (tmp_path / "shortcut").symlink_to(project)
    assert run_mpsd("enable", str(tmp_path / "shortcut") + "/").returncode == 0
    assert run_mpsd("enable", str(project / "src" / "..")).returncode == 0
    assert config_projects() == [str(project)]
    result = run_mpsd("enable", str(project))
    assert "already opted in" in result.stdout


def test_spaces_and_unicode_are_fine(tmp_path: Path) -> None:
    odd = tmp_path / "my code" / "données ✓"
    odd.mkdir(parents=True)
    assert run_mpsd("enable", str(odd)).returncode == 0
    assert config_projects() == [str(odd.resolve())]
    assert limits.read() is not None and limits.read().projects == (str(odd.resolve()),)  # type: ignore[union-attr]


@pytest.mark.parametrize("name", ['say "hi"', "back\\slash", "tab\there", "new\nline"])
def test_a_path_the_hooks_could_not_read_is_refused(tmp_path: Path, name: str) -> None:
    bad = tmp_path / name
    bad.mkdir()
    result = run_mpsd("enable", str(bad))
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "cannot read safely" in result.stderr
    assert not paths.config_file().exists() and not paths.limits_file().exists()


def test_enable_of_a_missing_directory_is_an_error(tmp_path: Path) -> None:
    result = run_mpsd("enable", str(tmp_path / "nope"))
    assert result.returncode == 2 and "not a directory" in result.stderr
    assert not paths.config_file().exists()


def test_a_broken_config_is_named_and_nothing_is_written(project: Path) -> None:
    paths.config_dir().mkdir(parents=True)
    paths.config_file().write_text("headroom = [oops\n")
    for command in ("enable", "disable", "projects"):
        result = run_mpsd(command, str(project)) if command != "projects" else run_mpsd(command)
        assert result.returncode == 2, command
        assert str(paths.config_file()) in result.stderr
        assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert paths.config_file().read_text() == "headroom = [oops\n"
    assert not paths.limits_file().exists()


def test_nested_projects_and_disable_inside_a_project_names_it(project: Path) -> None:
    inner = project / "src"
    assert run_mpsd("enable", str(project)).returncode == 0
    result = run_mpsd("enable", str(inner))
    assert result.returncode == 0 and f"inside the project {project}" in result.stdout
    assert run_mpsd("disable", str(inner)).returncode == 0
    result = run_mpsd("disable", str(inner / "deeper"), cwd=project)
    assert result.returncode != 0
    (inner / "deeper").mkdir()
    result = run_mpsd("disable", cwd=inner / "deeper")
    assert result.returncode == 1
    assert f"inside the project {project}" in result.stderr
    assert f"mpsd disable {project}" in result.stderr
    result = run_mpsd("disable", str(project.parent))
    assert result.returncode == 1 and "not opted in" in result.stderr


def test_projects_lists_text_and_json(project: Path, tmp_path: Path) -> None:
    result = run_mpsd("projects")
    assert result.returncode == 0 and "No directory is opted in" in result.stdout
    gone = tmp_path / "gone"
    gone.mkdir()
    run_mpsd("enable", str(project))
    run_mpsd("enable", str(gone))
    gone.rmdir()
    result = run_mpsd("projects")
    assert result.stdout.splitlines() == [str(project), f"{gone.resolve()}  (missing)"]
    data = json.loads(run_mpsd("projects", "--json").stdout)
    assert data["projects"][0] == {
        "path": str(project),
        "exists": True,
        "in_limits": True,
        "python_hooks": [],  # no venv in it
    }
    assert data["projects"][1]["exists"] is False
    assert data["config_file"] == str(paths.config_file())


def test_enable_waits_for_the_limits_lock_the_daemon_holds(project: Path, tmp_path: Path) -> None:
    released = tmp_path / "released"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from mpsd import paths; from mpsd.locks import exclusive\n"
            "with exclusive(paths.limits_lock_file()):\n"
            "    print('held', flush=True); time.sleep(1.5)\n"
            "    open(sys.argv[1], 'w').write(repr(time.time()))\n",
            str(released),
        ],
        stdout=subprocess.PIPE,
        text=True,
        env=dict(os.environ),
    )
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    result = run_mpsd("enable", str(project))
    holder.wait(timeout=30)
    assert result.returncode == 0, result.stderr
    # Neither file was written while the lock was held.
    release_time = float(released.read_text())
    assert paths.limits_file().stat().st_mtime >= release_time - 0.01
    assert paths.config_file().stat().st_mtime >= release_time - 0.01
    assert limits.read() is not None


def test_concurrent_enables_lose_nothing(tmp_path: Path) -> None:
    dirs = [tmp_path / f"p{i}" for i in range(6)]
    for d in dirs:
        d.mkdir()
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "mpsd", "enable", str(d)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env=dict(os.environ),
        )
        for d in dirs
    ]
    for proc in procs:
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
    expected = {str(d.resolve()) for d in dirs}
    assert set(config_projects()) == expected
    written = limits.read()
    assert written is not None and set(written.projects) == expected


def test_disable_works_for_a_directory_that_is_gone(tmp_path: Path) -> None:
    gone = tmp_path / "gone"
    gone.mkdir()
    assert run_mpsd("enable", str(gone)).returncode == 0
    gone.rmdir()
    result = run_mpsd("disable", str(gone))
    assert result.returncode == 0, result.stderr
    assert config_projects() == []


def test_an_unwritable_config_directory_is_one_sentence(project: Path) -> None:
    if os.geteuid() == 0:
        blocker = paths.config_dir()
        blocker.parent.mkdir(parents=True, exist_ok=True)
        blocker.write_text("a file where the config directory should be")
    else:
        paths.config_dir().mkdir(parents=True)
        paths.config_dir().chmod(0o500)
    result = run_mpsd("enable", str(project))
    assert result.returncode == 2
    assert result.stderr.startswith("mpsd: ") and result.stderr.count("\n") == 1
    assert "Traceback" not in result.stderr and "unexpected" not in result.stderr
