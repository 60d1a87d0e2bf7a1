"""The hostile catalogue (bench/hostile.py) as tests: every case must survive, so CI keeps
each one fixed. The big inputs are smaller here (bench/hostile.py --big runs 100 MB)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _load_catalogue():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location(
        "hostile_catalogue", ROOT / "bench" / "hostile.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


catalogue = _load_catalogue()

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("case", catalogue.CASES, ids=lambda c: c.id)
def test_hostile_case_survives(case, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    outcome = catalogue.run_case(case, tmp_path / "sandbox", catalogue.SUITE)
    if outcome.status == "skipped":
        pytest.skip(outcome.detail)
    commands = "\n".join(outcome.log[-40:])
    assert outcome.status == "survived", (
        f"{outcome.detail}\nreproduce: python bench/hostile.py --case '{case.id}' -v\n{commands}"
    )


def test_the_catalogue_covers_every_area_the_issue_names() -> None:
    areas = {case.area for case in catalogue.CASES}
    assert {
        "config",
        "daemon reload",
        "not a file",
        "symlinks",
        "umask",
        "read-only",
        "full disk",
        "kill -9",
        "clock",
        "history",
        "races",
        "rc files",
        "config.toml comments",
        "shells",
        "explain",
    } <= areas


def test_a_failing_case_prints_its_reproduction_line(capsys: pytest.CaptureFixture[str]) -> None:
    def broken(sb, sizes):  # type: ignore[no-untyped-def]
        catalogue.one_sentence(
            sb.run([sys.executable, "-c", "raise SystemExit('x' * 5 + chr(10) * 5)"])
        )
        catalogue.one_sentence(sb.run([sys.executable, "-c", "1/0"]))

    case = catalogue.Case("selftest", "a traceback is a failure", broken)
    catalogue.CASES.append(case)
    try:
        code = catalogue.main(["--case", case.id, "-j", "1"])
    finally:
        catalogue.CASES.remove(case)
    out = capsys.readouterr().out
    assert code == 1
    assert "FAILED selftest/a traceback is a failure: " in out and "printed a traceback" in out
    assert "reproduce: python bench/hostile.py --case 'selftest/a traceback is a failure' -v" in out
