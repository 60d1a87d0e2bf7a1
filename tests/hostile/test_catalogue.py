"""The hostile catalogue (bench/hostile.py) as tests, so CI keeps every case fixed.

One test per area; its cases run three at a time (as the bench runs them), each in a sandbox
of its own, with the big inputs smaller than the bench's (``--big`` there runs 100 MB).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _load_catalogue() -> Any:
    spec = importlib.util.spec_from_file_location(
        "hostile_catalogue", ROOT / "bench" / "hostile.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


catalogue = _load_catalogue()
catalogue.TIMED = False  # the bench's time bounds are the bench's: a busy machine fails none here
AREAS = list(dict.fromkeys(case.area for case in catalogue.CASES))

# Cases whose fix belongs to another branch (issue 12's shell and explain parts). Each must
# fail today; once the fix is merged the case survives and this test fails until its entry
# is removed here: a fixed case is then guarded like every other.
PENDING: dict[str, str] = {}  # case -> the fix it waits for (none: every case holds)

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("area", AREAS)
def test_every_hostile_case_of_the_area_survives(area: str, tmp_path: Path) -> None:
    cases = [case for case in catalogue.CASES if case.area == area]
    outcomes = catalogue.run_cases(cases, tmp_path, catalogue.SUITE, jobs=3)
    problems = []
    for outcome in outcomes:
        name = outcome.case.id
        if outcome.status == "failed" and name not in PENDING:
            commands = "\n    ".join(outcome.log[-12:])
            problems.append(
                f"{name}: {outcome.detail}\n  reproduce: python bench/hostile.py --case "
                f"'{name}' -v\n  last commands:\n    {commands}"
            )
        elif outcome.status == "survived" and name in PENDING:
            problems.append(f"{name} survives now: remove it from PENDING in {__file__}")
    skipped = [f"{o.case.id}: {o.detail}" for o in outcomes if o.status == "skipped"]
    if problems:
        pytest.fail("\n\n".join(problems), pytrace=False)
    if skipped and len(skipped) == len(outcomes):
        pytest.skip("; ".join(skipped))


def test_every_pending_case_exists() -> None:
    names = {case.id for case in catalogue.CASES}
    assert set(PENDING) <= names


def test_the_catalogue_covers_every_area_the_issue_names() -> None:
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
        "limits.toml",
        "rc files",
        "config.toml comments",
        "shells",
        "explain",
        "trust",
    } <= set(AREAS)


def test_a_failing_case_is_counted_and_prints_its_reproduction_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    def traceback(sb: Any, sizes: Any) -> None:
        catalogue.one_sentence(sb.run([sys.executable, "-c", "1/0"]))

    case = catalogue.Case("selftest", "a traceback is a failure", traceback)
    catalogue.CASES.append(case)
    try:
        code = catalogue.main(["--case", case.id, "-j", "1"])
    finally:
        catalogue.CASES.remove(case)
    out = capsys.readouterr().out
    assert code == 1
    assert "selftest                    1         0" in out
    assert "FAILED selftest/a traceback is a failure: " in out and "printed a traceback" in out
    assert "reproduce: python bench/hostile.py --case 'selftest/a traceback is a failure' -v" in out
