"""On a real Mac: the plist passes Apple's own checker and launchctl's output reads as
mpsd expects. Skipped elsewhere."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from mpsd.setup import launchd

pytestmark = [
    pytest.mark.macos,
    pytest.mark.skipif(sys.platform != "darwin", reason="needs macOS (plutil, launchctl)"),
]


def test_the_rendered_plist_passes_plutil_lint(tmp_path: Path) -> None:
    if shutil.which("plutil") is None:
        pytest.skip("plutil is not on PATH")
    plist = tmp_path / "io.github.mpsd.daemon.plist"
    plist.write_bytes(
        launchd.render(sys.executable, tmp_path / "c", tmp_path / "s", tmp_path / "d")
    )
    done = subprocess.run(
        ["plutil", "-lint", str(plist)], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.strip().endswith("OK")


def test_print_disabled_lines_have_the_form_mpsd_reads() -> None:
    result = launchd.launchctl("print-disabled", f"gui/{os.getuid()}")
    if not result.ok:
        pytest.skip(f"no GUI domain here ({result.message})")
    entries = re.findall(r'^\s*"([^"]+)"\s*=>\s*(\w+)', result.stdout, re.MULTILINE)
    assert entries, result.stdout[:500]
    label, _ = entries[0]
    assert launchd.parse_disabled(result.stdout, label) in (True, False)


def test_a_label_that_is_not_loaded_is_not_found() -> None:
    result = launchd.launchctl("print", f"gui/{os.getuid()}/io.github.mpsd.no-such-job")
    assert not result.ok
