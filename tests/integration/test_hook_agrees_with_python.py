"""`mpsd env`, `mpsd run`, `mpsd.apply()` and `mpsd status` decide in Python what the hooks decide
in the shell: the same limits.toml text, directory and environment give the same variables."""

from __future__ import annotations

import os
import random
import subprocess
from pathlib import Path

import pytest

from mpsd.env.decision import HIGH_VAR, LOW_VAR, MARK_HIGH, MARK_LOW, decide_exports
from mpsd.limits import parse_text
from tests.integration.shells import HOOKS, SCRIPT_ARGV, available, limits_text

pytestmark = pytest.mark.slow

RATIOS = [
    "0.77", "0.7", "1", "2", "2.0", "0.01", "1.999999999", "0.5", "0", "0.0", "2.5", "2.000000001",
    "-0.5", "abc", "", "5e-1", ".5", "1.", "0.5 ", " 0.5", "$(id)", "0.50", "0.123456789",
    "0.1234567891", "02", "1.5",
]  # fmt: skip
ENVIRONMENTS: list[dict[str, str]] = [
    {},
    {HIGH_VAR: "0.5"},
    {LOW_VAR: "0.4"},
    {HIGH_VAR: "0.77", LOW_VAR: "0.7", MARK_HIGH: "0.77", MARK_LOW: "0.7"},
    {HIGH_VAR: "0.9", LOW_VAR: "0.9", MARK_HIGH: "0.9", MARK_LOW: "0.9"},
    {HIGH_VAR: "0.9", LOW_VAR: "0.8", MARK_HIGH: "0.9", MARK_LOW: "0.9"},
    {MARK_HIGH: "0.9", MARK_LOW: "0.9"},
    {HIGH_VAR: "", LOW_VAR: ""},
    {HIGH_VAR: "", LOW_VAR: "", MARK_HIGH: "", MARK_LOW: ""},
]


def cases(base: Path, count: int) -> list[tuple[str, Path, dict[str, str]]]:
    rng = random.Random(20261130)
    # U+2028/U+2029 (and U+0085): names `mpsd enable` accepts, which glibc's UTF-8 locales
    # count as control characters.
    dirs = [
        base / "p",
        base / "p" / "a" / "b",
        base / "p2",
        base / "q",
        base / "p" / "x y",
        base / "p" / "line\u2028sep",
        base / "para\u2029sep",
        base / "para\u2029sep" / "next\u0085line",
    ]
    for d in dirs:
        d.mkdir(parents=True, exist_ok=True)
    project_pool = [
        str(base / "p"),
        str(base / "q"),
        "/",
        str(base / "p" / "a"),
        "relative/x",
        str(base / "p2") + "/",
        str(base / "p" / "x y"),
        str(base / "para\u2029sep"),
        str(base / "para\u2029sep" / "next\u0085line"),
    ]
    result = []
    for _ in range(count):
        projects = tuple(rng.sample(project_pool, rng.randint(0, 3)))
        text = limits_text(rng.choice(RATIOS), rng.choice(RATIOS), projects)
        if rng.random() < 0.15:
            text = text.replace("projects = [", "projects = [ ")
        if rng.random() < 0.1:
            text = text.replace('",\n', '"\n', 1)
        mutation = rng.random()
        if mutation < 0.08:  # a key line inside the projects block
            text = text.replace("projects = [\n", "projects = [\nhigh_watermark_ratio = 0.3\n")
        elif mutation < 0.16:  # no closing bracket
            text = text.replace("\n]\n", "\n")
        elif mutation < 0.24:  # a second high line, later
            text += "high_watermark_ratio = 0.2\n"
        elif mutation < 0.32:  # no low line
            text = "".join(line for line in text.splitlines(True) if not line.startswith("low_"))
        elif mutation < 0.40:  # two project blocks
            text += f'projects = [\n    "{base / "p2"}",\n]\n'
        if rng.random() < 0.1:  # no final newline
            text = text.rstrip("\n")
        result.append((text, rng.choice(dirs), rng.choice(ENVIRONMENTS)))
    # Every separator directory as a project, from itself and from below (the random cases may
    # miss these).
    for project in dirs[5:]:
        for directory in (project, *(d for d in dirs if d.parent == project)):
            result.append((limits_text("0.6", "0.5", (str(project),)), directory, {}))
    return result


SCRIPT = {
    "bash": """
source {hook}
for i in $(seq 0 {last}); do
  unset {all}
  while IFS= read -r kv; do [ -n "$kv" ] && export "$kv"; done < {base}/env.$i
  MPSD_CONFIG_DIR={base}/cfg.$i
  cd "$(cat {base}/dir.$i)"
  _mpsd_hook
  printf '%s|%s|%s\\n' "$i" "${{{high}-unset}}" "${{{low}-unset}}"
done
""",
    "zsh": """
source {hook}
for i in $(seq 0 {last}); do
  unset {all}
  while IFS= read -r kv; do [ -n "$kv" ] && export "$kv"; done < {base}/env.$i
  MPSD_CONFIG_DIR={base}/cfg.$i
  builtin cd -q "$(cat {base}/dir.$i)"
  _mpsd_hook
  printf '%s|%s|%s\\n' "$i" "${{{high}-unset}}" "${{{low}-unset}}"
done
""",
    "fish": """
source {hook}
for i in (seq 0 {last})
  set -e {all}
  for kv in (cat {base}/env.$i)
    set -l parts (string split -m1 = -- $kv)
    set -gx $parts[1] "$parts[2]"
  end
  set -gx MPSD_CONFIG_DIR {base}/cfg.$i
  cd (cat {base}/dir.$i)
  _mpsd_hook
  set -l h unset; set -q {high}; and set h "${high}"
  set -l l unset; set -q {low}; and set l "${low}"
  printf '%s|%s|%s\\n' $i "$h" "$l"
end
""",
}


@pytest.mark.parametrize("kind", ["bash", "zsh", "fish"])
def test_the_hook_and_the_python_decision_agree(kind: str, tmp_path: Path) -> None:
    if not available(kind):
        pytest.skip(f"no {kind}")
    all_cases = cases(tmp_path / "dirs", 150)
    for i, (text, directory, env) in enumerate(all_cases):
        (tmp_path / f"cfg.{i}").mkdir()
        (tmp_path / f"cfg.{i}" / "limits.toml").write_text(text)
        (tmp_path / f"dir.{i}").write_text(str(directory))
        (tmp_path / f"env.{i}").write_text("".join(f"{k}={v}\n" for k, v in env.items()))
    script = SCRIPT[kind].format(
        hook=HOOKS[kind],
        last=len(all_cases) - 1,
        base=tmp_path,
        high=HIGH_VAR,
        low=LOW_VAR,
        all=" ".join((HIGH_VAR, LOW_VAR, MARK_HIGH, MARK_LOW)),
    )
    argv = [*SCRIPT_ARGV[kind], script]
    # A UTF-8 locale, as on a Mac: there bash and zsh classify characters beyond ASCII.
    env = {**os.environ, "LC_ALL": "C.UTF-8"}
    out = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=True, env=env)
    assert out.stderr == ""
    got = [line.split("|") for line in out.stdout.splitlines()]
    assert len(got) == len(all_cases)
    mismatches = []
    for (index, high, low), (text, directory, env) in zip(got, all_cases):
        after = decide_exports(parse_text(text), str(directory), env).environment_after(env)
        expected = (after.get(HIGH_VAR, "unset"), after.get(LOW_VAR, "unset"))
        if (high, low) != expected:
            mismatches.append((index, text, str(directory), env, (high, low), expected))
    assert mismatches == []
    # The cases are not trivial: some export, some keep the user's values, some take back.
    exported = {pair for _, pair_high, pair_low in got for pair in [(pair_high, pair_low)]}
    assert ("unset", "unset") in exported and len(exported) >= 4
