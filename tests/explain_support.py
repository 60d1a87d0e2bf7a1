"""Helpers shared by the explain tests: the real messages, and checks against them."""

from __future__ import annotations

from typing import Any

from tests.fixture_files import oom_messages


def fixtures() -> tuple[dict[str, Any], ...]:
    return oom_messages()


def by_id(ident: str) -> dict[str, Any]:
    return next(d for d in fixtures() if d["id"] == ident)


def close(got: Any, want: Any) -> bool:
    """Equal, numbers within 0.5% (the messages print rounded values)."""
    if isinstance(want, bool) or not isinstance(want, (int, float)):
        return bool(got == want)
    if not isinstance(got, (int, float)) or isinstance(got, bool):
        return False
    if want == 0:
        return got == 0
    return abs(got - want) <= abs(want) * 0.005


def matches(finding: dict[str, Any], expected: dict[str, Any]) -> bool:
    return all(k in finding and close(finding[k], v) for k, v in expected.items())


def has_match(findings: list[dict[str, Any]], expected: dict[str, Any]) -> bool:
    return any(matches(f, expected) for f in findings)


def consistent(finding: dict[str, Any], expected: dict[str, Any]) -> bool:
    """No number in ``finding`` contradicts ``expected`` (missing ones are fine)."""
    return all(
        finding.get(k) is None or close(finding[k], v)
        for k, v in expected.items()
        if k != "kind" and v is not None
    )
