"""The interpreter start-up hook with real interpreters: venvs made by `python -m venv` (and
`uv venv` when uv is here) with the pyenv Pythons, started as an IDE, a notebook server or cron
would (a subprocess with a clean environment, no hooked shell anywhere), set up and taken out by
the real `mpsd enable`/`disable`/`uninstall`, seen by `status`, `projects` and `doctor`."""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from mpsd.env import pyhooks
from tests.conftest import run_mpsd
from tests.integration.shells import limits_text

HIGH = "PYTORCH_MPS_HIGH_WATERMARK_RATIO"
LOW = "PYTORCH_MPS_LOW_WATERMARK_RATIO"
# What the child reports: the two variables and the modules start-up left loaded.
REPORT = (
    "import json, os, sys\n"
    "print(json.dumps({'high': os.environ.get('PYTORCH_MPS_HIGH_WATERMARK_RATIO'),\n"
    "  'low': os.environ.get('PYTORCH_MPS_LOW_WATERMARK_RATIO'),\n"
    "  'modules': sorted(m for m in sys.modules if m != 'json' and not m.startswith('json.'))}))\n"
)


def pyenv(version: str) -> str | None:
    found = sorted(glob.glob(f"/root/.pyenv/versions/{version}.*/bin/python{version}"))
    return found[-1] if found else None


# The oldest Python the hook promises (3.8), the oldest and newest mpsd runs on (3.9, 3.13).
PYTHONS = {v: pyenv(v) for v in ("3.8", "3.9", "3.13")}
AVAILABLE = [pytest.param(p, id=v) for v, p in PYTHONS.items() if p] or [
    pytest.param(sys.executable, id="this-python")
]


def make_venv(python: str, where: Path) -> str:
    subprocess.run(
        [python, "-m", "venv", "--without-pip", str(where)], check=True, capture_output=True
    )
    return str(where / "bin" / "python")


def clean_env(home: Path, **extra: str) -> dict[str, str]:
    """What an IDE or launchd hands a python: no hooked shell, no MPSD_* variables."""
    return {"PATH": "/usr/bin:/bin", "HOME": str(home), "LANG": "C.UTF-8", **extra}


def report(python: str, cwd: Path, env: dict[str, str], *args: str) -> dict[str, object]:
    done = subprocess.run(
        [python, *(args or ("-c", REPORT))],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == "", done.stderr  # never prints
    result: dict[str, object] = json.loads(done.stdout)
    return result


@pytest.fixture
def home_config(isolated_dirs: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> Path:
    """mpsd's config dir where a python with nothing but HOME finds it: ~/.config/mps."""
    config = isolated_dirs["home"] / ".config" / "mps"
    monkeypatch.setenv("MPSD_CONFIG_DIR", str(config))
    return config


@pytest.fixture
def project(tmp_path: Path) -> Path:
    path = tmp_path / "proj"
    (path / "src").mkdir(parents=True)
    return Path(os.path.realpath(path))


def set_limits(config: Path, project: Path, high: str = "0.77", low: str = "0.7") -> None:
    (config / "limits.toml").write_text(limits_text(high, low, (str(project),)))


@pytest.mark.parametrize("python", AVAILABLE)
def test_a_python_started_without_a_shell_gets_the_variables_in_the_project_and_only_there(
    python: str, project: Path, home_config: Path, isolated_dirs: dict[str, Path], tmp_path: Path
) -> None:
    venv_python = make_venv(python, project / ".venv")
    done = run_mpsd("enable", str(project))
    assert done.returncode == 0, done.stderr
    assert "Set up the start-up hook in .venv/" in done.stdout
    set_limits(home_config, project)
    env = clean_env(isolated_dirs["home"])
    inside = report(venv_python, project / "src", env)
    assert (inside["high"], inside["low"]) == ("0.77", "0.7")
    # Started elsewhere (cron's cwd is HOME): the environment itself is in the project.
    assert report(venv_python, isolated_dirs["home"], env)["high"] == "0.77"
    # Another python started in the project without the hook: nothing (the hook is the venv's).
    other = make_venv(python, tmp_path / "other-venv")
    assert report(other, project, env)["high"] is None
    # Nothing imported beyond what start-up had: only the hook's own module is new. (Reading
    # any .pth file costs site.py a codec module: _bootlocale before 3.10, utf_8_sig after;
    # the comparison is with a .pth of another package that imports nothing.)
    run_mpsd("disable", str(project))
    (site,) = glob.glob(str(project / ".venv" / "lib" / "python3.*" / "site-packages"))
    Path(site, "another-package.pth").write_text("# a .pth that imports nothing\n")
    bare = report(venv_python, project, env)
    assert bare["high"] is None
    assert set(inside["modules"]) - set(bare["modules"]) == {"_mpsd_startup"}  # type: ignore[arg-type]


def test_python_dash_m_of_a_module_gets_them_as_a_notebook_kernel_would(
    project: Path, home_config: Path, isolated_dirs: dict[str, Path]
) -> None:
    """A Jupyter server starts its kernel as `python -m ipykernel_launcher` from its own
    environment; ipykernel is not installed here, so a module of the project stands in."""
    python = next(p for p in PYTHONS.values() if p) if any(PYTHONS.values()) else sys.executable
    venv_python = make_venv(python, project / "venv")
    assert run_mpsd("enable", str(project)).returncode == 0
    set_limits(home_config, project)
    (project / "src" / "readvars.py").write_text(REPORT)
    got = report(venv_python, project / "src", clean_env(isolated_dirs["home"]), "-m", "readvars")
    assert (got["high"], got["low"]) == ("0.77", "0.7")


def test_an_interpreter_elsewhere_named_with_python_counts_in_the_project_only(
    project: Path, home_config: Path, isolated_dirs: dict[str, Path], tmp_path: Path
) -> None:
    python = next((p for p in PYTHONS.values() if p), sys.executable)
    conda_like = make_venv(python, tmp_path / "envs" / "ml")
    done = run_mpsd("enable", str(project), "--python", conda_like)
    assert done.returncode == 0, done.stderr
    assert "Set up the start-up hook in " in done.stdout
    assert "No virtual environment in" not in done.stdout
    set_limits(home_config, project)
    env = clean_env(isolated_dirs["home"])
    assert report(conda_like, project / "src", env)["high"] == "0.77"
    assert report(conda_like, tmp_path, env)["high"] is None
    listed = json.loads(run_mpsd("projects", "--json").stdout)["projects"][0]["python_hooks"]
    assert [(e["python"], e["state"]) for e in listed] == [(conda_like, "current")]


def test_values_the_user_set_win_even_one_of_them(
    project: Path, home_config: Path, isolated_dirs: dict[str, Path]
) -> None:
    python = next((p for p in PYTHONS.values() if p), sys.executable)
    venv_python = make_venv(python, project / ".venv")
    assert run_mpsd("enable", str(project)).returncode == 0
    set_limits(home_config, project)
    home = isolated_dirs["home"]
    got = report(venv_python, project, clean_env(home, **{HIGH: "1.3"}))
    assert (got["high"], got["low"]) == ("1.3", None)
    got = report(venv_python, project, clean_env(home, **{LOW: "0.5"}))
    assert (got["high"], got["low"]) == (None, "0.5")


BROKEN = {
    "missing": None,
    "garbage": "\x00\xff not toml at all {{{\n",
    "low above high": limits_text("0.5", "0.7", ("{project}",)),
    "zero": limits_text("0", "0", ("{project}",)),
    "a number PyTorch would misread": limits_text("5e-1", "0.5", ("{project}",)),
    "over 256 KiB": limits_text("0.77", "0.7", ("{project}",)) + "#" * 300_000,
    "a directory": "DIR",
    "a FIFO": "FIFO",
}


@pytest.mark.parametrize("case", list(BROKEN))
def test_a_broken_or_missing_limits_toml_does_nothing_and_prints_nothing(
    case: str, project: Path, home_config: Path, isolated_dirs: dict[str, Path]
) -> None:
    python = next((p for p in PYTHONS.values() if p), sys.executable)
    venv_python = make_venv(python, project / ".venv")
    assert run_mpsd("enable", str(project)).returncode == 0
    limits = home_config / "limits.toml"
    limits.unlink()
    text = BROKEN[case]
    if text == "DIR":
        limits.mkdir()
    elif text == "FIFO":
        os.mkfifo(limits)  # nobody writes it: a blocking open would hang python's start
    elif text is not None:
        limits.write_bytes(
            text.replace("{project}", str(project)).encode("utf-8", "surrogateescape")
        )
    got = report(venv_python, project, clean_env(isolated_dirs["home"]))
    assert (got["high"], got["low"]) == (None, None)


def test_a_removed_working_directory_prints_nothing(
    project: Path, home_config: Path, isolated_dirs: dict[str, Path]
) -> None:
    python = next((p for p in PYTHONS.values() if p), sys.executable)
    venv_python = make_venv(python, project / ".venv")
    assert run_mpsd("enable", str(project)).returncode == 0
    set_limits(home_config, project)
    gone = isolated_dirs["home"] / "gone"
    gone.mkdir()
    script = f'cd {gone} && rmdir {gone} && exec {venv_python} -c "$0"'
    done = subprocess.run(
        ["/bin/sh", "-c", script, "import os; print(os.environ.get('" + HIGH + "'))"],
        env=clean_env(isolated_dirs["home"]),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout.strip() == "0.77"  # the environment is still in the project


def test_a_recreated_venv_loses_the_hook_status_and_doctor_say_so_and_enable_puts_it_back(
    project: Path, home_config: Path, isolated_dirs: dict[str, Path]
) -> None:
    python = next((p for p in PYTHONS.values() if p), sys.executable)
    venv_python = make_venv(python, project / ".venv")
    assert run_mpsd("enable", str(project)).returncode == 0
    set_limits(home_config, project)
    env = clean_env(isolated_dirs["home"])
    assert "start-up hook:   in " in run_mpsd("status", cwd=project).stdout
    shutil.rmtree(project / ".venv")
    make_venv(python, project / ".venv")  # rm -rf .venv; python -m venv .venv
    assert report(venv_python, project, env)["high"] is None
    status = run_mpsd("status", cwd=project / "src").stdout
    assert "start-up hook:   LOST" in status and "`mpsd enable` puts it back" in status
    doctor = run_mpsd("doctor", cwd=project)
    assert doctor.returncode == 1
    assert "the start-up hook is gone from" in doctor.stdout
    assert f"fix: run `mpsd enable {project}`" in doctor.stdout
    again = run_mpsd("enable", cwd=project)
    assert "Set up the start-up hook in .venv/" in again.stdout
    assert report(venv_python, project, env)["high"] is not None  # and the hook ran from it
    assert "start-up hook:   in " in run_mpsd("status", cwd=project).stdout
    assert "start-up hook  current in" in run_mpsd("doctor", cwd=project).stdout


def test_doctor_names_a_copy_from_another_mpsd(project: Path, home_config: Path) -> None:
    python = next((p for p in PYTHONS.values() if p), sys.executable)
    make_venv(python, project / ".venv")
    assert run_mpsd("enable", str(project)).returncode == 0
    (site,) = [entry.site for entry in pyhooks.record()]
    with open(Path(site, pyhooks.MODULE_FILE), "a") as handle:
        handle.write("# an older mpsd\n")
    doctor = run_mpsd("doctor", cwd=project)
    assert f"{site} has another mpsd's copy" in doctor.stdout
    run_mpsd("enable", str(project))
    assert pyhooks.check_copy(site) == "current"


def test_disable_and_uninstall_take_every_copy_out(
    project: Path, home_config: Path, tmp_path: Path, isolated_dirs: dict[str, Path]
) -> None:
    python = next((p for p in PYTHONS.values() if p), sys.executable)
    make_venv(python, project / ".venv")
    make_venv(python, project / "env")
    elsewhere = make_venv(python, tmp_path / "elsewhere")
    done = run_mpsd("enable", str(project), "--python", elsewhere)
    assert done.returncode == 0, done.stderr
    sites = [entry.site for entry in pyhooks.record()]
    assert len(sites) == 3 and all(pyhooks.has_copy(site) for site in sites)
    done = run_mpsd("disable", str(project))
    assert done.stdout.count("Removed the start-up hook from") == 3
    assert not any(
        os.path.exists(Path(s, n)) for s in sites for n in (pyhooks.PTH_FILE, pyhooks.MODULE_FILE)
    )
    assert pyhooks.record() == []

    assert run_mpsd("enable", str(project)).returncode == 0
    other = tmp_path / "other"
    other.mkdir()
    make_venv(python, other / ".venv")
    assert run_mpsd("enable", str(other)).returncode == 0
    sites = [entry.site for entry in pyhooks.record()]
    assert len(sites) == 3
    dry = run_mpsd("uninstall", "--dry-run")
    assert all(site + "/" + pyhooks.PTH_FILE in dry.stdout for site in sites)
    assert all(pyhooks.has_copy(site) for site in sites)
    done = run_mpsd("uninstall")
    assert done.returncode == 0, done.stderr
    assert not any(os.listdir(Path(site)) for site in sites)  # bytecode gone too
    assert not os.path.exists(pyhooks.record_path())


def test_a_wrong_python_changes_nothing(project: Path, home_config: Path, tmp_path: Path) -> None:
    for wrong, said in (
        (str(tmp_path / "nope" / "python"), "is not an executable file"),
        ("/bin/sh", "did not say where its site-packages is"),
        ("no-such-python-anywhere", "is not on PATH"),
    ):
        done = run_mpsd("enable", str(project), "--python", wrong)
        assert done.returncode == 2
        assert said in done.stderr and len(done.stderr.strip().splitlines()) == 1
        assert "Traceback" not in done.stderr
    assert json.loads(run_mpsd("projects", "--json").stdout)["projects"] == []
    done = run_mpsd("enable", str(project), "--python", sys.executable, "--no-python-hook")
    assert done.returncode == 2 and "contradict" in done.stderr


def test_no_python_hook_and_no_venv(project: Path, home_config: Path) -> None:
    python = next((p for p in PYTHONS.values() if p), sys.executable)
    make_venv(python, project / ".venv")
    done = run_mpsd("enable", str(project), "--no-python-hook")
    assert done.returncode == 0 and "start-up hook" not in done.stdout
    assert pyhooks.record() == [] and pyhooks.env_copy_site(str(project / ".venv")) is None
    assert "start-up hook:   none" in run_mpsd("status", cwd=project).stdout
    checks = json.loads(run_mpsd("doctor", "--json", cwd=project).stdout)["checks"]
    (hook,) = [check for check in checks if check["name"] == "start-up hook"]
    assert hook["status"] == "skipped" and f"mpsd enable {project}" in hook["fix"]
    bare = project / "src"
    done = run_mpsd("enable", str(bare))
    assert "No virtual environment in" in done.stdout and "--python PATH" in done.stdout


@pytest.mark.skipif(shutil.which("uv") is None, reason="uv is not installed here")
def test_a_venv_made_by_uv_gets_the_hook(
    project: Path, home_config: Path, isolated_dirs: dict[str, Path]
) -> None:
    python = next((p for p in PYTHONS.values() if p), sys.executable)
    uv = shutil.which("uv")
    assert uv is not None
    subprocess.run(
        [uv, "venv", "--python", python, str(project / ".venv")],
        check=True,
        capture_output=True,
        env={**os.environ, "UV_NO_CACHE": "1", "UV_PYTHON_DOWNLOADS": "never"},
    )
    assert run_mpsd("enable", str(project)).returncode == 0
    set_limits(home_config, project)
    env = clean_env(isolated_dirs["home"])
    got = report(str(project / ".venv" / "bin" / "python"), project, env)
    assert (got["high"], got["low"]) == ("0.77", "0.7")
    # `uv run` from a launcher: uv finds the project's .venv and starts its python.
    uv_env = {**env, "UV_NO_CACHE": "1", "UV_PYTHON_DOWNLOADS": "never"}
    got = report(uv, project / "src", uv_env, "run", "--no-project", "python", "-c", REPORT)
    assert (got["high"], got["low"]) == ("0.77", "0.7")


TORCH_SITE = [
    p for p in sys.path if p.endswith("site-packages") and os.path.isdir(os.path.join(p, "torch"))
]


@pytest.mark.skipif(not TORCH_SITE, reason="torch is not installed for this python")
def test_a_fresh_torch_process_has_the_values_before_import_torch(
    project: Path, home_config: Path, isolated_dirs: dict[str, Path]
) -> None:
    """A venv of this python whose site-packages reaches this one's torch through a path .pth
    (a second torch install is 700 MB): the hook has run before the script's first line."""
    base = getattr(sys, "_base_executable", sys.executable)
    venv_python = make_venv(base, project / ".venv")
    (site,) = glob.glob(str(project / ".venv" / "lib" / "python3.*" / "site-packages"))
    Path(site, "torch-from-the-test-venv.pth").write_text(TORCH_SITE[0] + "\n")
    assert run_mpsd("enable", str(project)).returncode == 0
    set_limits(home_config, project)
    script = (
        "import os, json\n"
        "before = [os.environ.get(n) for n in ('" + HIGH + "', '" + LOW + "')]\n"
        "import torch\n"
        "print(json.dumps({'before': before, 'torch': torch.__version__}))\n"
    )
    done = subprocess.run(
        [venv_python, "-c", script],
        cwd=project,
        env=clean_env(isolated_dirs["home"]),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got["before"] == ["0.77", "0.7"]
    assert got["torch"]


def test_a_pth_whose_module_was_deleted_by_hand_prints_nothing(
    project: Path, home_config: Path, isolated_dirs: dict[str, Path]
) -> None:
    python = next((p for p in PYTHONS.values() if p), sys.executable)
    venv_python = make_venv(python, project / ".venv")
    assert run_mpsd("enable", str(project)).returncode == 0
    (site,) = [entry.site for entry in pyhooks.record()]
    os.unlink(Path(site, pyhooks.MODULE_FILE))
    pyhooks.remove_bytecode(site)
    got = report(venv_python, project, clean_env(isolated_dirs["home"]))  # stderr == ""
    assert got["high"] is None
    doctor = run_mpsd("doctor", cwd=project)
    assert "the start-up hook is gone from" in doctor.stdout


def test_a_venv_whose_python_is_gone_is_one_warning(project: Path, home_config: Path) -> None:
    (project / ".venv" / "bin").mkdir(parents=True)
    (project / ".venv" / "pyvenv.cfg").write_text("home = /nowhere\n")
    (project / ".venv" / "bin" / "python").symlink_to("/nowhere/python3")
    done = run_mpsd("enable", str(project))
    assert done.returncode == 0
    assert "is missing (a venv whose base Python was removed?)" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("python", AVAILABLE)
def test_enable_writes_the_hooks_bytecode_for_a_python_that_writes_none(
    python: str, project: Path, home_config: Path, isolated_dirs: dict[str, Path]
) -> None:
    """PYTHONDONTWRITEBYTECODE (common in containers and some setups) would otherwise make every
    start compile the hook: enable compiles it with the environment's own python."""
    venv_python = make_venv(python, project / ".venv")
    assert run_mpsd("enable", str(project)).returncode == 0
    env = clean_env(isolated_dirs["home"], PYTHONDONTWRITEBYTECODE="1")
    done = subprocess.run(
        [venv_python, "-v", "-c", "pass"], cwd=project, env=env, capture_output=True, text=True
    )
    loaded = [line for line in done.stderr.splitlines() if "code object from" in line]
    assert any(pyhooks.MODULE + "." in line and "__pycache__" in line for line in loaded), loaded
    assert report(venv_python, project, env)["high"] is not None  # and the hook ran from it
