"""``mpsd doctor``: check the whole chain and say what is wrong and how to fix it.

Exit 0 when nothing is wrong, 1 when a check found a problem (warnings are advice
and do not change the exit status).
"""

from __future__ import annotations

import argparse
import json
import sys

from mpsd.setup import checks as doctor_checks

_MARKS = {"ok": "ok", "problem": "PROBLEM", "warning": "warning", "skipped": "--"}


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print the checks as JSON")


def run(args: argparse.Namespace) -> int:
    checks = doctor_checks.run_all()
    healthy = not any(check.status == doctor_checks.PROBLEM for check in checks)
    if args.json:
        payload = {"healthy": healthy, "checks": [check.to_json() for check in checks]}
        sys.stdout.write(json.dumps(payload, indent=2) + "\n")
    else:
        width = max(len(check.name) for check in checks)
        for check in checks:
            mark = _MARKS.get(check.status, check.status)
            print(f"{mark:<8} {check.name:<{width}}  {check.detail}")
            if check.fix and check.status != doctor_checks.OK:
                label = "how" if check.status == doctor_checks.SKIPPED else "fix"
                print(f"{'':<8} {'':<{width}}  {label}: {check.fix}")
        problems = sum(check.status == doctor_checks.PROBLEM for check in checks)
        print()
        print("All is well." if healthy else f"{problems} problem(s) found.")
    return 0 if healthy else 1
