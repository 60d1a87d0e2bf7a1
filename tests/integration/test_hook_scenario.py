"""The shell hooks' contract in the default run: for bash, zsh and fish, one real shell process
runs one script through the scenario a user lives (cd into an opted-in project, below it, into a
sibling that shares its name's prefix, a value set by hand, cd out), calling the hook as the
shell's prompt does. tests/integration/test_hooks.py drives the same cases, and many more, in
interactive shells (`slow`)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.integration.shells import HIGH, HOOKS, LOW, SCRIPT_ARGV, available, limits_text

# What a prompt runs: bash's PROMPT_COMMAND, zsh's precmd functions, fish's fish_prompt event
# (and `cd` alone runs the hook in zsh, through chpwd, and in fish, through PWD). `show` prints
# the step, both variables as the shell holds them, and HIGH as a child process sees it.
PROMPT = {
    "bash": """
source '{hook}'
show() {{
  eval "$PROMPT_COMMAND"
  printf '%s|%s|%s|%s\\n' "$1" "${{{high}-unset}}" "${{{low}-unset}}" "$(printenv {high})"
}}
""",
    "zsh": """
source '{hook}'
show() {{
  local f; for f in $precmd_functions; do $f; done
  printf '%s|%s|%s|%s\\n' "$1" "${{{high}-unset}}" "${{{low}-unset}}" "$(printenv {high})"
}}
""",
    "fish": """
source '{hook}'
function show
  emit fish_prompt
  set -l h unset; set -q {high}; and set h ${high}
  set -l l unset; set -q {low}; and set l ${low}
  printf '%s|%s|%s|%s\\n' $argv[1] $h $l (printenv {high}; or true)
end
""",
}
SCENARIO = """
cd '{outside}'; show outside
cd '{project}'; show project
cd '{below}'; show below
cd '{sibling}'; show prefix-sibling
cd '{project}'; show project
cd '{outside}'; show out
{set_by_hand}; show set-by-hand
cd '{project}'; show set-by-hand-in-project
cd '{outside}'; show set-by-hand-out
"""
EXPECTED = [
    "outside|unset|unset|",
    "project|0.77|0.7|0.77",
    "below|0.77|0.7|0.77",
    "prefix-sibling|unset|unset|",
    "project|0.77|0.7|0.77",
    "out|unset|unset|",
    "set-by-hand|0.5|unset|0.5",  # the user's value is theirs: never replaced nor taken back
    "set-by-hand-in-project|0.5|unset|0.5",
    "set-by-hand-out|0.5|unset|0.5",
]


@pytest.mark.parametrize("kind", ["bash", "zsh", "fish"])
def test_the_hook_in_one_script_in_and_below_a_project_not_in_a_sibling_and_out(
    kind: str, tmp_path: Path, isolated_dirs: dict[str, Path]
) -> None:
    if not available(kind):
        pytest.skip(f"no {kind}")
    work = tmp_path / "work"
    project, below = work / "diffusion", work / "diffusion" / "src" / "deep"
    sibling, outside = work / "diffusion-old", work / "elsewhere"
    for folder in (below, sibling, outside):
        folder.mkdir(parents=True)
    isolated_dirs["config"].mkdir()
    (isolated_dirs["config"] / "limits.toml").write_text(
        limits_text("0.77", "0.7", (str(project),))
    )
    hand = f"set -gx {HIGH} 0.5" if kind == "fish" else f"export {HIGH}=0.5"
    script = PROMPT[kind].format(hook=HOOKS[kind], high=HIGH, low=LOW) + SCENARIO.format(
        outside=outside, project=project, below=below, sibling=sibling, set_by_hand=hand
    )
    env = {**os.environ, "LC_ALL": "C.UTF-8"}
    done = subprocess.run(
        [*SCRIPT_ARGV[kind], script], capture_output=True, text=True, env=env, timeout=60
    )
    assert (done.returncode, done.stderr) == (0, ""), kind
    assert done.stdout.splitlines() == EXPECTED, kind
