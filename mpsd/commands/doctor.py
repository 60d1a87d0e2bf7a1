"""``mpsd doctor``: every finding (``mpsd.health``) with its detail, each problem with its fix;
exit 1 when one is a problem."""

from __future__ import annotations

import argparse
import json
import os
import sys

from mpsd.env import project_python
from mpsd.health import chain, findings, system
from mpsd.health.findings import OK, PROBLEM, SKIPPED, WARNING, Finding
from mpsd.term import plural, style, visible, wrap

_MARKS = {OK: "ok", PROBLEM: "PROBLEM", WARNING: "warning", SKIPPED: "--"}


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print the checks as JSON")
    parser.add_argument(
        "--python",
        metavar="PATH",
        help="the interpreter whose torch to check (default: the python this shell runs "
        "here: the active venv's, else the project's .venv, else python3 on PATH)",
    )


def run(args: argparse.Namespace) -> int:
    if args.python is not None:
        python = (project_python.given(args.python), "--python")
    else:
        python = project_python.find()
    project_python.current_directory()  # whether the hook is active here needs a "here"
    found = checks(python)
    healthy = not any(check.level == PROBLEM for check in found)
    if args.json:
        listed = [
            {"name": f.name, "status": f.level, "detail": f.detail, "fix": f.fix} for f in found
        ]
        sys.stdout.write(json.dumps({"healthy": healthy, "checks": listed}, indent=2) + "\n")
        return 0 if healthy else 1
    paint = style(sys.stdout)
    width = max(len(check.name) for check in found)
    indent = " " * (8 + 1 + width + 2)
    for check in found:
        mark = _MARKS[check.level]
        lead = f"{mark:<8} {check.name:<{width}}  "
        lines = wrap(visible(check.detail), None, lead, indent) or [lead.rstrip()]
        if check.fix and check.level != OK:
            label = "how" if check.level == SKIPPED else "fix"
            lines.extend(wrap(f"{label}: {visible(check.fix)}", None, indent, indent + "     "))
        if paint.color:
            colour = {PROBLEM: paint.warn, WARNING: paint.warn, OK: paint.cmd}
            lines[0] = colour.get(check.level, paint.dim)(mark) + lines[0][len(mark) :]
        print("\n".join(lines))
    problems = sum(check.level == PROBLEM for check in found)
    print()
    print("All is well." if healthy else f"{plural(problems, 'problem')} found.")
    return 0 if healthy else 1


def checks(python: tuple[str, str]) -> list[Finding]:
    """Every finding, in the chain's order; torch's in ``python`` (a path and how it was found)."""
    agent, start = system.agent()
    here = chain.read(every_project=True)
    found = findings.read(here, os.environ, start)
    at = next(i for i, f in enumerate(found) if f.name == "daemon")
    found[at:at] = [*agent, *system.services()]
    at = next(
        i for i, f in enumerate(found) if f.name == "start-up hook" or f.name == "hook active"
    )
    found[at:at] = system.shell_hooks(os.environ)
    refused = project_python.unvetted(*python, "doctor")
    if refused:
        return [*found, Finding("torch", SKIPPED, *refused)]
    own = python[1].startswith("the project's ") or python[1] == "--python"
    if here.here is not None and here.here.in_limits and own:
        # What an MLX job gets, asked of the opted-in project's own python.
        answer = system.torch_info(python[0], 180.0, system.MLX_PROBE)
        found = [findings.mlx(here, python[0], answer) if f.name == "mlx" else f for f in found]
    return [*found, system.check_torch(python, system.torch_info(python[0]))]
