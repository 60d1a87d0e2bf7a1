"""The classes of message explain once read wrong (issue 20), one case each written from the
public formats (tests/fixtures/oom-classes.jsonl), and long lines as rich and loguru really
printed them (tests/fixtures/console-loggers.jsonl): every kind and number right, and the text
says the true "why" and never the fix of another framework."""

from __future__ import annotations

from typing import Any

import pytest

import mpsd
from mpsd.oom import find_errors
from mpsd.oom.render import render
from tests.explain_support import GIB, has_match, limits_for
from tests.fixture_files import console_loggers, oom_classes


@pytest.mark.parametrize("case", oom_classes(), ids=lambda d: d["id"])
def test_each_class_is_read_and_explained_right(case: dict[str, Any]) -> None:
    found = mpsd.explain(case["text"])
    assert len(found) == 1 and has_match(found, case["expected"]), (case["expected"], found)
    for limits in (None, limits_for(0.62, 24 * GIB)):
        text = " ".join(render(find_errors(case["text"]), limits).split())
        assert all(" ".join(s.split()) in text for s in case["says"]), text
        assert not any(s in text for s in case["never"]), text


@pytest.mark.parametrize("case", console_loggers(), ids=lambda d: d["id"])
def test_a_console_logger_wrapping_a_line_loses_no_number(case: dict[str, Any]) -> None:
    assert mpsd.explain(case["text"]) == mpsd.explain(case["message"])
    assert "no cap" not in render(find_errors(case["text"]))


def test_the_framework_of_a_metal_error_comes_from_its_own_lines_or_traceback() -> None:
    status = "Insufficient Memory (00000008:kIOGPUCommandBufferCallbackErrorOutOfMemory)"
    for before, framework in (
        ("", None),
        ('File "/v/site-packages/torch/nn/modules/module.py", line 1\n', "torch"),
        ('  File "/v/site-packages/mlx_lm/generate.py", line 3\n', "mlx"),
        ("ggml_metal_graph_compute: command buffer 0 failed with status 5\n", "ggml"),
    ):
        assert [f["framework"] for f in mpsd.explain(before + status)] == [framework]
