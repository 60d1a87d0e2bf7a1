"""A stand-in ``launchctl`` for tests: put on PATH, it records every call and keeps a little
state (what is loaded where) so install, uninstall and doctor can be driven on Linux.

Its state lives in a directory (``$STANDIN_LAUNCHCTL_DIR``):
- ``calls.jsonl``: one JSON list of arguments a line, in call order;
- ``loaded.json``: ``{"domain": ..., "plist": ..., "arguments": [...], "sessions": [...]}``
  while loaded; like launchd, ``bootstrap user/UID`` refuses (134, "Service cannot load in
  requested session") a plist whose ``LimitLoadToSessionType`` lacks "Background";
- ``fail.json``: ``{"bootstrap gui": [125, "text"], ...}``: the call whose verb and domain
  kind (``gui``/``user``) match exits with that status, printing the text on stderr (the
  texts tests use are launchctl's real ones, from the macOS fixtures);
- ``kickstart -k`` restarts a loaded job in place (it stays loaded);
- ``linger``: a number N: after a bootout, ``print`` still finds the job N more times;
- ``disabled``: when present, ``print-disabled`` lists the agent as disabled.
"""

from __future__ import annotations

import json
import os
import stat
import sys
from dataclasses import dataclass
from pathlib import Path

from mpsd.paths import LABEL

SCRIPT = r"""#!{python}
import json, os, plistlib, sys
state = os.environ["STANDIN_LAUNCHCTL_DIR"]
def path(name): return os.path.join(state, name)
args = sys.argv[1:]
with open(path("calls.jsonl"), "a") as log:
    log.write(json.dumps(args) + "\n")
verb = args[0] if args else ""
target = args[-1] if verb == "kickstart" else args[1] if len(args) > 1 else ""
kind = target.split("/")[0]
try:
    fail = json.load(open(path("fail.json")))
except FileNotFoundError:
    fail = {{}}
key = verb + " " + kind
if key in fail:
    code, text = fail[key]
    sys.stderr.write(text + "\n")
    sys.exit(code)
def loaded_file(label):
    return path("loaded.json" if label == "{label}" else "loaded-" + label + ".json")
def loaded(label):
    try:
        return json.load(open(loaded_file(label)))
    except FileNotFoundError:
        return None
def linger():
    try:
        return int(open(path("linger")).read())
    except FileNotFoundError:
        return 0
label = target.split("/")[-1] if target.count("/") == 2 else "{label}"
if verb == "print":
    job = loaded(label)
    n = linger()
    if job and target == job["domain"] + "/" + label:
        print(target + " = {{")
        print("\tactive count = 1")
        print("\tpath = " + job["plist"])
        print("\ttype = LaunchAgent")
        print("\tstate = running")
        print()
        print("\tprogram = " + job["arguments"][0])
        print("\targuments = {{")
        for a in job["arguments"]:
            print("\t\t" + a)
        print("\t}}")
        print()
        print("\tpid = 4242")
        print("}}")
        sys.exit(0)
    if n > 0 and target.endswith("/" + label) and os.path.exists(path("booted_out")):
        open(path("linger"), "w").write(str(n - 1))
        print(target + " = {{")
        print("\tstate = exiting")
        print("}}")
        sys.exit(0)
    sys.stderr.write('Could not find service "' + label + '" in domain for user gui: 0\n')
    sys.exit(113)
if verb == "bootout":
    job = loaded(label)
    if not job or target != job["domain"] + "/" + label:
        sys.stderr.write("Boot-out failed: 3: No such process\n")
        sys.exit(3)
    os.unlink(loaded_file(label))
    open(path("booted_out"), "w").close()
    sys.exit(0)
if verb == "bootstrap":
    with open(args[2], "rb") as fh:
        plist = plistlib.load(fh)
    label = plist.get("Label", "{label}")
    if loaded(label):
        sys.stderr.write("Bootstrap failed: 5: Input/output error\n")
        sys.stderr.write("Try re-running the command as root for richer errors.\n")
        sys.exit(5)
    sessions = plist.get("LimitLoadToSessionType", ["Aqua"])
    if isinstance(sessions, str):
        sessions = [sessions]
    if kind == "user" and "Background" not in sessions:
        # user/UID is a Background session; a plist without the key is Aqua-only.
        sys.stderr.write("Bootstrap failed: 134: Service cannot load in requested session\n")
        sys.exit(134)
    json.dump({{"domain": target, "plist": args[2], "arguments": plist["ProgramArguments"],
               "sessions": sessions}},
              open(loaded_file(label), "w"))
    sys.exit(0)
if verb == "kickstart":
    job = loaded(label)
    if not job or target != job["domain"] + "/" + label:
        sys.stderr.write('Could not find service "' + label + '" in domain for user gui: 0\n')
        sys.exit(113)
    sys.exit(0)
if verb == "enable":
    sys.exit(0)
if verb == "print-disabled":
    print("disabled services = {{")
    print('\t"com.apple.ScreenReaderUIServer" => enabled')
    if os.path.exists(path("disabled")):
        print('\t"' + label + '" => disabled')
    print("}}")
    sys.exit(0)
sys.stderr.write("Unrecognized subcommand: " + verb + "\n")
sys.exit(64)
"""


@dataclass
class StandinLaunchctl:
    """Handle on an installed stand-in: its calls, and switches for failures."""

    state: Path

    def calls(self) -> list[list[str]]:
        log = self.state / "calls.jsonl"
        if not log.exists():
            return []
        return [json.loads(line) for line in log.read_text().splitlines()]

    def verbs(self) -> list[str]:
        return [call[0] + " " + call[1] if len(call) > 1 else call[0] for call in self.calls()]

    def clear_calls(self) -> None:
        (self.state / "calls.jsonl").unlink(missing_ok=True)

    def fail(self, verb_kind: str, code: int, text: str) -> None:
        path = self.state / "fail.json"
        current = json.loads(path.read_text()) if path.exists() else {}
        current[verb_kind] = [code, text]
        path.write_text(json.dumps(current))

    def linger(self, times: int) -> None:
        (self.state / "linger").write_text(str(times))

    def disable(self) -> None:
        (self.state / "disabled").touch()

    def loaded(self, label: str = LABEL) -> dict[str, object] | None:
        path = self.state / ("loaded.json" if label == LABEL else f"loaded-{label}.json")
        return json.loads(path.read_text()) if path.exists() else None

    def load(self, label: str, plist: Path, arguments: list[str]) -> None:
        """An agent launchd has loaded already (written by another install, or by brew)."""
        name = "loaded.json" if label == LABEL else f"loaded-{label}.json"
        job = {"domain": f"gui/{os.getuid()}", "plist": str(plist), "arguments": arguments}
        (self.state / name).write_text(json.dumps({**job, "sessions": ["Aqua"]}))


def install(bin_dir: Path, state: Path) -> StandinLaunchctl:
    """Write the stand-in as ``bin_dir/launchctl`` (run by this interpreter); the caller puts
    ``bin_dir`` first on PATH and sets ``STANDIN_LAUNCHCTL_DIR`` to ``state``."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    state.mkdir(parents=True, exist_ok=True)
    script = bin_dir / "launchctl"
    script.write_text(SCRIPT.format(python=sys.executable, label=LABEL))
    script.chmod(script.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return StandinLaunchctl(state)
