"""Property tests: no text, however odd, makes explain crash or invent a kind."""

from __future__ import annotations

import json

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import mpsd
from mpsd.oom import KINDS, find_errors
from mpsd.oom.normalize import decode
from mpsd.oom.render import render
from tests.explain_support import by_id, consistent, fixtures

TEXTS = [case["text"] for case in fixtures()]
SETTINGS = settings(deadline=None, max_examples=150, suppress_health_check=[HealthCheck.too_slow])


def _check(text: str) -> None:
    findings = find_errors(text)
    for finding in findings:
        assert finding.kind in KINDS
        json.dumps(finding.to_json(), allow_nan=False)
    render(findings, None, color=True)
    render(findings, None, color=False)


@SETTINGS
@given(st.text())
def test_arbitrary_text_never_crashes(text: str) -> None:
    _check(text)


@SETTINGS
@given(st.binary(max_size=4000))
def test_arbitrary_bytes_never_crash(data: bytes) -> None:
    _check(decode(data))


# Fragments real errors are made of, in any order: the readers must not trip on them.
PIECES = st.sampled_from(
    [
        "MPS backend out of memory (",
        "MPS allocated: ",
        "other allocations: ",
        "max allowed: ",
        "). Tried to allocate ",
        " on private pool",
        " on shared pool",
        "CUDA out of memory. ",
        "(GPU 0; ",
        " total capacity; ",
        " already allocated; ",
        " free; ",
        " reserved in total by PyTorch)",
        "GPU 0 has a total capacity of ",
        " of which ",
        " is free. ",
        "invalid low watermark ratio ",
        "invalid high watermark ratio ",
        "Invalid buffer size: ",
        "DefaultCPUAllocator: not enough memory: you tried to allocate ",
        "Allocation on device ",
        "INTERNAL ASSERT FAILED at MPSAllocator.mm",
        "18.13 GB",
        "0 bytes",
        "1e308",
        "nan",
        "-1",
        "99999999999999999999999 GiB",
        "\\n",
        "\n",
        "\x1b[31m",
        "`",
        "**",
        " ",
    ]
)


@SETTINGS
@given(st.lists(PIECES, max_size=40).map("".join))
def test_any_mix_of_real_fragments_never_crashes(text: str) -> None:
    _check(text)


@st.composite
def mangled(draw: st.DrawFn) -> tuple[str, dict]:
    case = draw(st.sampled_from(fixtures()))
    text = case["text"]
    for _ in range(draw(st.integers(0, 6))):
        if not text:
            break
        i = draw(st.integers(0, len(text) - 1))
        op = draw(st.sampled_from(["delete", "insert", "upper", "newline", "duplicate", "cut"]))
        if op == "delete":
            text = text[:i] + text[i + 1 :]
        elif op == "insert":
            text = text[:i] + draw(st.text(max_size=5)) + text[i:]
        elif op == "upper":
            text = text[:i] + text[i:].upper()
        elif op == "newline":
            text = text[:i] + "\n" + text[i:]
        elif op == "duplicate":
            text = text[:i] + text + text[i:]
        else:
            text = text[:i]
    return text, case["expected"]


@SETTINGS
@given(mangled())
def test_mangled_real_messages_never_crash(sample: tuple[str, dict]) -> None:
    text, _ = sample
    _check(text)
    assert isinstance(mpsd.explain(text), list)


@SETTINGS
@given(st.sampled_from(TEXTS), st.integers(1, 120))
@example(by_id("pytorch-pr20618-before")["text"], 97)  # a line that starts "0. 12 vs 0"
def test_a_real_message_wrapped_at_any_width_keeps_its_numbers(text: str, width: int) -> None:
    case = next(c for c in fixtures() if c["text"] == text)
    wrapped = "\n".join(text[i : i + width] for i in range(0, len(text), width))
    findings = [f.to_json() for f in find_errors(wrapped)]
    assert any(f["kind"] == case["expected"]["kind"] for f in findings)
    same_kind = [f for f in findings if f["kind"] == case["expected"]["kind"]]
    assert any(consistent(f, case["expected"]) for f in same_kind)
