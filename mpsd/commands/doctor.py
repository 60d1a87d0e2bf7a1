"""``mpsd doctor``: check the whole chain and say what is wrong and how to fix it.

Exit 0 when nothing is wrong, 1 when a check found a problem (warnings are advice
and do not change the exit status). torch is checked in the project's python (the one
``python`` here would run: ``mpsd.env.project_python``), or the one ``--python`` names.
"""

from __future__ import annotations

import argparse
import json
import sys

from mpsd.env import project_python
from mpsd.setup import checks as doctor_checks
from mpsd.term import plural, style, wrap

_MARKS = {"ok": "ok", "problem": "PROBLEM", "warning": "warning", "skipped": "--"}


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
    checks = doctor_checks.run_all(python=python)
    healthy = not any(check.status == doctor_checks.PROBLEM for check in checks)
    if args.json:
        payload = {"healthy": healthy, "checks": [check.to_json() for check in checks]}
        sys.stdout.write(json.dumps(payload, indent=2) + "\n")
        return 0 if healthy else 1
    paint = style(sys.stdout)
    width = max(len(check.name) for check in checks)
    indent = " " * (8 + 1 + width + 2)
    for check in checks:
        mark = _MARKS.get(check.status, check.status)
        lead = f"{mark:<8} {check.name:<{width}}  "
        lines = wrap(check.detail, None, lead, indent) or [lead.rstrip()]
        if check.fix and check.status != doctor_checks.OK:
            label = "how" if check.status == doctor_checks.SKIPPED else "fix"
            lines.extend(wrap(f"{label}: {check.fix}", None, indent, indent + "     "))
        if paint.color:
            colour = {"problem": paint.warn, "warning": paint.warn, "ok": paint.cmd}
            first = colour.get(check.status, paint.dim)(mark) + lines[0][len(mark) :]
            lines[0] = first
        print("\n".join(lines))
    problems = sum(check.status == doctor_checks.PROBLEM for check in checks)
    print()
    print("All is well." if healthy else f"{plural(problems, 'problem')} found.")
    return 0 if healthy else 1
