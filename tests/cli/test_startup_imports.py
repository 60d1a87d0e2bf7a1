"""The fast commands keep the heavy libraries off their start-up path (docs/architecture.md:
under 4x a bare ``python -c pass``; ``bench/startup.py`` measures it). Each command runs as the
console script does, on a machine with a config.toml, a limits.toml and a history, and reports
which of the libraries it must not need were loaded when it finished. Standard-library modules
such as dataclasses, pathlib and typing are not watched: readable code comes first there."""

from __future__ import annotations

import subprocess
import sys

import pytest

from mpsd import paths
from mpsd.config import default_config_text
from tests.conftest import ROOT
from tests.integration.shells import limits_text

# Run the command, then print the watched modules it loaded (the command's own output goes to
# stdout first; the report is the last line, after `loaded:`).
WRAPPER = (
    "import sys; from mpsd.cli import main\n"
    "watched = sys.argv.pop(1).split(',')\n"
    "try:\n"
    "    code = main()\n"
    "finally:\n"
    "    loaded = ','.join(m for m in watched if m in sys.modules)\n"
    "    sys.stdout.write(f'\\nloaded:{loaded}\\n')\n"
)
HEAVY = ("torch", "psutil", "watchdog", "tomlkit", "tomli_w")
LEAN = (*HEAVY, "sqlite3")


def loaded(*args: str, watched: tuple[str, ...]) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", WRAPPER, ",".join(watched), *args],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=60,
        check=False,
    )
    assert "Traceback" not in done.stderr, done.stderr
    report = done.stdout.rsplit("\nloaded:", 1)[-1].strip()
    return [name for name in report.split(",") if name]


@pytest.fixture(autouse=True)
def installed(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A config.toml as `mpsd install` writes it, a limits.toml and a history."""
    paths.config_dir().mkdir(parents=True)
    paths.config_file().write_text(default_config_text())
    paths.limits_file().write_text(limits_text("0.77", "0.7", (str(tmp_path),)))
    subprocess.run(
        [sys.executable, "-m", "mpsd", "daemon", "--once"], capture_output=True, check=True
    )


def test_status_loads_no_heavy_library_but_sqlite() -> None:
    assert loaded("status", watched=HEAVY) == []  # it does read the history: sqlite3
    assert loaded("status", "--json", watched=HEAVY) == []
    assert loaded("jobs", watched=(*HEAVY, "subprocess", "shutil")) == []


@pytest.mark.parametrize("args", [("env",), ("env", "--shell", "json"), ("env", str(ROOT))])
def test_env_loads_no_heavy_library(args: tuple[str, ...]) -> None:
    assert loaded(*args, watched=LEAN) == []


@pytest.mark.parametrize("json_flag", [(), ("--json",)])
def test_explain_loads_no_heavy_library(json_flag: tuple[str, ...]) -> None:
    example = str(ROOT / "examples" / "oom.txt")
    assert loaded("explain", *json_flag, example, watched=LEAN) == []


def test_the_report_sees_a_module_that_is_loaded() -> None:
    """The check itself can fail: `status --json` does load json, and status sqlite3."""
    assert loaded("status", "--json", watched=("json", "sqlite3")) == ["json", "sqlite3"]
