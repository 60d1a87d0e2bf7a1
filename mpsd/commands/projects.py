"""``mpsd projects [--json]``: the opted-in directories."""

from __future__ import annotations

import argparse
import json

from mpsd.env.optin import listing

_HOOK_STATES = {
    "installed": "start-up hook in",
    "lost": "start-up hook LOST (run `mpsd enable` there to put it back)",
    "none": "no start-up hook in",
}


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print them as JSON")


def run(args: argparse.Namespace) -> int:
    data = listing()
    if args.json:
        print(json.dumps(data, indent=2, ensure_ascii=False))
        return 0
    if not data["projects"]:
        print("No directory is opted in; run `mpsd enable` in a project to opt it in.")
        return 0
    for item in data["projects"]:
        notes = []
        if not item["exists"]:
            notes.append("missing")
        if not item["in_limits"]:
            notes.append("not yet in limits.toml")
        suffix = f"  ({', '.join(notes)})" if notes else ""
        print(f"{item['path']}{suffix}")
        for env in item["python_hooks"]:
            print(f"    {_HOOK_STATES[env['state']]}: {env['environment']}")
    return 0
