"""packaging/homebrew/mpsd.rb: valid Ruby (`ruby -c`), the Homebrew conventions it must follow,
and its resources exactly what packaging/homebrew/resources.py writes from pyproject.toml and
a recorded `pip install --dry-run --report` (no network)."""

from __future__ import annotations

import copy
import hashlib
import importlib.util
import json
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tests.conftest import ROOT

FORMULA = ROOT / "packaging" / "homebrew" / "mpsd.rb"
REPORT = ROOT / "tests" / "fixtures" / "homebrew" / "pip-report.json"


def script() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "resources", ROOT / "packaging" / "homebrew" / "resources.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.skipif(shutil.which("ruby") is None, reason="no ruby here (apt-get install ruby)")
def test_the_formula_is_valid_ruby() -> None:
    done = subprocess.run(["ruby", "-c", str(FORMULA)], capture_output=True, text=True)
    assert done.returncode == 0 and "Syntax OK" in done.stdout, done.stderr


def test_the_formula_follows_homebrews_conventions_for_a_python_tool_with_a_service() -> None:
    text = FORMULA.read_text()
    for needed in (
        "include Language::Python::Virtualenv",
        "virtualenv_install_with_resources",
        "depends_on :macos",
        'generate_completions_from_executable(bin/"mpsd", "completion")',
        'run [opt_bin/"mpsd", "daemon"]',
        "keep_alive crashed: true",
        'log_path var/"log/mpsd.log"',
        'shell_output("#{bin}/mpsd --version")',
        "#{bin}/mpsd explain",
    ):
        assert needed in text, needed
    caveats = text[text.index("def caveats") : text.index("test do")]
    assert "mpsd install" in caveats and "brew services start mpsd" in caveats
    # Uninstall before the package goes: a removed program leaves launchd retrying it.
    assert caveats.index("mpsd uninstall") < caveats.index("brew uninstall mpsd")
    assert "Cellar" not in text.split("service do")[1].split("end")[0]


def test_the_formulas_resources_are_what_the_script_writes_from_pyproject() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "packaging" / "homebrew" / "resources.py"),
         "--report", str(REPORT), "--check"],
        capture_output=True, text=True,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    resources = script()
    wanted = resources.dependencies(ROOT / "pyproject.toml")
    text = FORMULA.read_text()
    for name, unconditional in wanted.items():
        # tomli is for Python < 3.11 only: the formula's python@3.13 needs none.
        assert (f'resource "{name}" do' in text) == unconditional, name
    assert (
        resources.python_version(text)
        == json.loads(REPORT.read_text())["environment"]["python_version"]
    )


def test_the_script_refuses_a_report_without_a_dependency_or_with_a_wheel(tmp_path: Path) -> None:
    resources = script()
    report = json.loads(REPORT.read_text())
    wanted = resources.dependencies(ROOT / "pyproject.toml")
    short = copy.deepcopy(report)
    short["install"] = [i for i in short["install"] if i["metadata"]["name"] != "watchdog"]
    with pytest.raises(resources.Failure, match="lacks watchdog"):
        resources.resources(short, wanted, "3.13")
    wheel = copy.deepcopy(report)
    wheel["install"][0]["download_info"]["url"] = "https://example.org/psutil-7.2.2-cp36-abi3.whl"
    with pytest.raises(resources.Failure, match="not an sdist"):
        resources.resources(wheel, wanted, "3.13")
    with pytest.raises(resources.Failure, match=r"made with Python 3\.13"):
        resources.resources(report, wanted, "3.12")


def test_the_script_sets_the_release_sdist_and_keeps_the_rest(tmp_path: Path) -> None:
    resources = script()
    sdist = tmp_path / "mpsd-9.8.7.tar.gz"
    sdist.write_bytes(b"not really a tarball")
    formula = tmp_path / "mpsd.rb"
    formula.write_text(FORMULA.read_text())
    args = ["--report", str(REPORT), "--formula", str(formula), "--sdist", str(sdist)]
    assert resources.main(args) == 0
    new = formula.read_text()
    assert 'url "https://files.pythonhosted.org/packages/source/m/mpsd/mpsd-9.8.7.tar.gz"' in new
    assert f'  sha256 "{hashlib.sha256(sdist.read_bytes()).hexdigest()}"\n' in new
    assert new.count("sha256 ") == FORMULA.read_text().count("sha256 ")
    assert resources.main([*args, "--check"]) == 0
