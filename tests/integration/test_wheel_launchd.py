"""The built wheel carries launchd/ inside the package, where mpsd finds it (the shell/
hooks have their own wheel test)."""

from __future__ import annotations

import os
import plistlib
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.slow  # builds a wheel

PLIST = "mpsd/_data/launchd/io.github.mpsd.daemon.plist"


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    done = subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    (built,) = out.glob("mpsd-*.whl")
    return built


@pytest.mark.slow
def test_the_wheel_contains_the_plist_template(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        assert PLIST in names
        template = plistlib.loads(archive.read(PLIST))
    assert template["Label"] == "io.github.mpsd.daemon"
    assert template["ProgramArguments"][1:] == ["-m", "mpsd", "daemon"]


@pytest.mark.slow
def test_an_installed_wheel_finds_its_templates_inside_the_package(
    wheel: Path, tmp_path: Path
) -> None:
    target = tmp_path / "site"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--no-index",
            "--target",
            str(target),
            str(wheel),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(target)
    done = subprocess.run(
        [sys.executable, "-c", "from mpsd.setup import launchd; print(launchd.template_file())"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=60,
        check=True,
    )
    found = Path(done.stdout.strip())
    assert found == target / PLIST
    assert found.is_file()
