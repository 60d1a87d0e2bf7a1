"""What a release ships: the wheel carries the shell hooks and the plist template (both live
outside the package), installs into a fresh venv of the oldest and the newest Python with a
working `mpsd install --dry-run`, names its own version; the sdist holds what its tests read."""

from __future__ import annotations

import glob
import os
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.slow  # builds the sdist and the wheel; installs from the registry

PLIST = "mpsd/_data/launchd/io.github.mpsd.daemon.plist"
PYTHONS = {
    version: sorted(glob.glob(os.path.expanduser(f"~/.pyenv/versions/{version}*/bin/python")))
    for version in ("3.9", "3.13")
}


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The sdist and the wheel, as a release builds them (the wheel from the sdist)."""
    out = tmp_path_factory.mktemp("dist")
    done = subprocess.run(
        [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    (wheel,) = out.glob("mpsd-*.whl")
    (sdist,) = out.glob("mpsd-*.tar.gz")
    return {"wheel": wheel, "sdist": sdist}


def test_the_wheel_contains_the_hook_files_and_the_plist_template(dist: dict[str, Path]) -> None:
    with zipfile.ZipFile(dist["wheel"]) as archive:
        names = set(archive.namelist())
        for shell in ("bash", "zsh", "fish"):
            name = f"mpsd/_data/shell/mpsd.{shell}"
            assert name in names
            assert archive.read(name) == (ROOT / "shell" / f"mpsd.{shell}").read_bytes()
        assert archive.read(PLIST) == (ROOT / "launchd" / Path(PLIST).name).read_bytes()


def fresh_venv(python: str, where: Path, wheel: Path) -> Path:
    """A venv of ``python`` with the wheel installed (its dependencies from the registry)."""
    subprocess.run([python, "-m", "venv", str(where)], check=True, timeout=300)
    done = subprocess.run(
        [str(where / "bin" / "pip"), "install", "-q", str(wheel)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return where / "bin" / "mpsd"


@pytest.mark.parametrize("version", sorted(PYTHONS))
def test_the_wheel_in_a_fresh_venv_installs_mpsd(
    version: str, dist: dict[str, Path], tmp_path: Path
) -> None:
    if not PYTHONS[version]:
        pytest.skip(f"no Python {version} under ~/.pyenv/versions")
    mpsd = fresh_venv(PYTHONS[version][-1], tmp_path / "venv", dist["wheel"])
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # the wheel's mpsd only

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [str(mpsd), *args], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, done.stdout + done.stderr
        return done

    with zipfile.ZipFile(dist["wheel"]) as archive:
        (metadata,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        lines = archive.read(metadata).decode().splitlines()
    (version_line,) = [line for line in lines if line.startswith("Version: ")]
    assert run("--version").stdout.strip() == f"mpsd {version_line.split(': ')[1]}"
    hook = run("hook", "zsh")  # the hook scripts, from the wheel's mpsd/_data
    assert hook.stdout == (ROOT / "shell" / "mpsd.zsh").read_text()
    dry = run("install", "--dry-run", "--shell", "zsh,bash")
    assert dry.stdout.startswith("Dry run: nothing was changed.")
    assert "~/.zshrc" in dry.stdout


def test_the_sdist_holds_what_its_tests_read(dist: dict[str, Path], tmp_path: Path) -> None:
    with tarfile.open(dist["sdist"]) as archive:
        archive.extractall(tmp_path)
    (unpacked,) = tmp_path.glob("mpsd-*")
    assert (unpacked / "examples" / "oom.txt").read_bytes() == (
        ROOT / "examples" / "oom.txt"
    ).read_bytes()
    # The tests that read examples/, the README and docs/, run from the unpacked sdist.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "not slow",
         "tests/cli/test_explain_cli.py", "tests/cli/test_docs.py"],
        cwd=unpacked, env=env, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:]
    assert " passed" in done.stdout.splitlines()[-1]
