"""The one lookup of the recorded real outputs the tests read (``tests/fixtures/``).

Everything lives inside the repo: a plain clone runs its own tests. ``tests/fixtures/README.md``
says where each record came from.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

FIXTURES = Path(__file__).resolve().parent / "fixtures"
OOM_MESSAGES = FIXTURES / "oom-messages.jsonl"
OOM_CLASSES = FIXTURES / "oom-classes.jsonl"
CONSOLE_LOGGERS = FIXTURES / "console-loggers.jsonl"
COMMAND_OUTPUTS = FIXTURES / "macos" / "command-outputs.jsonl"
HOSTILE_COMMAND_LINES = FIXTURES / "hostile-command-lines.jsonl"
OOM_FRAMEWORKS = FIXTURES / "oom-frameworks-dev.jsonl"
KILL_LINES = FIXTURES / "macos" / "memorystatus-kill-lines.jsonl"


def _jsonl(path: Path) -> tuple[dict[str, Any], ...]:
    with path.open(encoding="utf-8") as handle:
        return tuple(json.loads(line) for line in handle if line.strip())


@cache
def oom_messages() -> tuple[dict[str, Any], ...]:
    """The out-of-memory messages users pasted into public issues, with their expected fields."""
    return _jsonl(OOM_MESSAGES)


@cache
def oom_classes() -> tuple[dict[str, Any], ...]:
    """One case of each class of message explain once got wrong, written from the public formats."""
    return _jsonl(OOM_CLASSES)


@cache
def oom_frameworks() -> dict[str, dict[str, Any]]:
    """Other frameworks' errors and the systems' kills as users pasted them, by id, with the
    numbers each paste states."""
    return {row["id"]: row for row in _jsonl(OOM_FRAMEWORKS)}


@cache
def kill_lines() -> dict[str, dict[str, Any]]:
    """macOS's memorystatus kill lines (xnu's formats, and as logs quoted them), by id."""
    return {row["id"]: row for row in _jsonl(KILL_LINES)}


@cache
def console_loggers() -> tuple[dict[str, Any], ...]:
    """Long error lines as rich and loguru really printed them, with the plain message."""
    return _jsonl(CONSOLE_LOGGERS)


@cache
def command_outputs() -> tuple[dict[str, Any], ...]:
    """Outputs of vm_stat, sysctl, memory_pressure, top, launchctl... as people pasted them."""
    return _jsonl(COMMAND_OUTPUTS)


def outputs_of(command: str) -> list[dict[str, Any]]:
    """The recorded outputs of one command (``vm_stat``, ``launchctl bootstrap``...)."""
    return [row for row in command_outputs() if row["command"] == command]


def output_by_id(record_id: str) -> dict[str, Any]:
    return next(row for row in command_outputs() if row["id"] == record_id)


@cache
def hostile_command_lines() -> tuple[dict[str, Any], ...]:
    """Command lines carrying terminal control sequences (``what``, ``command``)."""
    return _jsonl(HOSTILE_COMMAND_LINES)
