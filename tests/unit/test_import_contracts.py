"""The layering in pyproject's ``[tool.importlinter]`` (docs/architecture.md) holds, and each
contract fails when the code breaks it: import-linter runs on this checkout, then on a copy
with one forbidden import added per contract."""

from __future__ import annotations

import pkgutil
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import mpsd
from mpsd._toml import tomllib
from tests.conftest import ROOT

LINT = "from importlinter.cli import lint_imports_command; lint_imports_command()"


def lint(root: Path) -> tuple[int, str]:
    """import-linter's exit code and report (plain text: some versions colour it anyway)."""
    done = subprocess.run(
        [sys.executable, "-c", LINT, "--no-cache"],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    return done.returncode, re.sub(r"\x1b\[[0-9;]*m", "", done.stdout + done.stderr)


def contracts() -> dict[str, dict[str, object]]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    return {contract["id"]: contract for contract in config["contracts"]}


def test_the_import_contracts_hold() -> None:
    code, report = lint(ROOT)
    assert code == 0, report
    assert f"Contracts: {len(contracts())} kept, 0 broken." in report


def test_oom_is_forbidden_every_other_module_of_mpsd() -> None:
    children = {f"mpsd.{m.name}" for m in pkgutil.iter_modules(mpsd.__path__)}
    forbidden = set(contracts()["oom"]["forbidden_modules"])  # type: ignore[call-overload]
    assert forbidden == children - {"mpsd.oom", "mpsd.term", "mpsd.sizes", "mpsd.ratio"}


# One import per contract that the contract must refuse.
BREAKS = {
    "parts": ("mpsd/paths.py", "import mpsd.cli"),
    "commands": ("mpsd/commands/status.py", "import mpsd.commands.env"),
    "oom": ("mpsd/oom/finding.py", "import mpsd.config"),
    "pure": ("mpsd/ratio.py", "import os"),
}


@pytest.mark.slow
def test_each_contract_fails_on_an_import_that_breaks_it(tmp_path: Path) -> None:
    assert set(BREAKS) == set(contracts())
    shutil.copytree(ROOT / "mpsd", tmp_path / "mpsd", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    for module, line in BREAKS.values():
        path = tmp_path / module
        path.write_text(path.read_text() + f"\n{line}  # noqa\n")
    code, report = lint(tmp_path)
    assert code != 0
    names = {id_: str(contract["name"]) for id_, contract in contracts().items()}
    for id_, name in names.items():
        # The report may wrap a long name: compare with the whitespace squeezed.
        assert f"{' '.join(name.split())} BROKEN" in " ".join(report.split()), id_
    assert f"Contracts: 0 kept, {len(names)} broken." in report
