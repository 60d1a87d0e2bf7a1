"""The shell hooks in real interactive bash and zsh, started without any rc file of the user's."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import wait_for
from tests.integration.shells import (
    ARGV,
    HIGH,
    HOOKS,
    LIMITS_CAP,
    LOW,
    SCRIPT_ARGV,
    Shell,
    available,
    limits_text,
    padded_limits,
)

pytestmark = pytest.mark.slow
KINDS = [
    pytest.param(k, marks=pytest.mark.skipif(not available(k), reason=f"no {k}"))
    for k in ("bash", "zsh", "fish")
]
POSIX_KINDS = KINDS[:2]


@pytest.fixture
def tree(tmp_path: Path, isolated_dirs: dict[str, Path]) -> dict[str, Path]:
    """A project, a subdirectory, a sibling sharing its name's prefix, an outside directory
    and a symlink to the project; limits.toml opting the project in."""
    base = tmp_path / "work"
    dirs = {
        "project": base / "diffusion",
        "sub": base / "diffusion" / "src" / "deep",
        "sibling": base / "diffusion-old",
        "outside": base / "elsewhere",
        "link": base / "shortcut",
    }
    for key in ("sub", "sibling", "outside"):
        dirs[key].mkdir(parents=True)
    dirs["link"].symlink_to(dirs["project"])
    dirs["config"] = isolated_dirs["config"]
    dirs["config"].mkdir(parents=True, exist_ok=True)
    write_limits(dirs["config"], limits_text(projects=(str(dirs["project"].resolve()),)))
    dirs["home"] = isolated_dirs["home"]
    return dirs


def write_limits(config: Path, text: str) -> None:
    # Atomic, like mpsd.limits.write: the hook never sees half a file.
    tmp = config / ".limits.toml.tmp"
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, config / "limits.toml")


def env_for(tree: dict[str, Path]) -> dict[str, str]:
    return {"MPSD_CONFIG_DIR": str(tree["config"]), "HOME": str(tree["home"])}


@pytest.fixture
def shells(tree: dict[str, Path]) -> Iterator[list[Shell]]:
    opened: list[Shell] = []
    yield opened
    for shell in opened:
        shell.child.close(force=True)


def start(shells: list[Shell], kind: str, tree: dict[str, Path], **kwargs: object) -> Shell:
    shell = Shell(kind, env_for(tree), tree["outside"], **kwargs)  # type: ignore[arg-type]
    shells.append(shell)
    return shell


@pytest.mark.parametrize("kind", KINDS)
def test_exports_inside_the_project_and_below_and_nothing_in_a_prefix_sibling(
    kind: str, tree: dict[str, Path], shells: list[Shell]
) -> None:
    sh = start(shells, kind, tree)
    assert sh.values() == ("unset", "unset")
    sh.quiet(f"cd '{tree['project']}'")
    assert sh.values() == ("0.77", "0.7")
    assert sh.exported() == {HIGH: "0.77", LOW: "0.7"}
    sh.quiet(f"cd '{tree['sub']}'")
    assert sh.values() == ("0.77", "0.7")
    sh.quiet(f"cd '{tree['sibling']}'")
    assert sh.values() == ("unset", "unset")
    assert sh.exported() == {}
    # Through a symlink, the physical directory decides; the logical one stays the shell's.
    sh.quiet(f"cd '{tree['link']}'")
    assert sh.values() == ("0.77", "0.7")
    assert sh.run("pwd")[0] == [str(tree["link"])]
    if kind != "fish":
        assert sh.run("dirs -l")[0] == [str(tree["link"])]
        sh.quiet(f"cd '{tree['link'] / 'src'}'")
        sh.quiet("cd ..")
        assert sh.run('printf "%s\\n" "$PWD" "$OLDPWD"')[0] == [
            str(tree["link"]),
            str(tree["link"] / "src"),
        ]
    sh.quiet(f"cd '{tree['outside']}'")
    assert sh.values() == ("unset", "unset")


@pytest.mark.parametrize("kind", KINDS)
def test_an_update_of_limits_toml_is_picked_up_at_the_next_prompt(
    kind: str, tree: dict[str, Path], shells: list[Shell]
) -> None:
    sh = start(shells, kind, tree)
    sh.quiet(f"cd '{tree['sub']}'")
    assert sh.values() == ("0.77", "0.7")
    write_limits(tree["config"], limits_text("0.61", "0.61", (str(tree["project"]),)))
    sh.quiet("")
    assert sh.values() == ("0.61", "0.61")
    # The project taken out (mpsd disable): gone at the next prompt.
    write_limits(tree["config"], limits_text("0.61", "0.61", ()))
    sh.quiet("")
    assert sh.values() == ("unset", "unset")
    # limits.toml removed: the hook does nothing, quietly.
    (tree["config"] / "limits.toml").unlink()
    sh.quiet("")
    assert sh.values() == ("unset", "unset")
    # Another config directory chosen in the running shell: read from the next prompt on.
    other = tree["config"].parent / "other-config"
    other.mkdir()
    write_limits(other, limits_text("0.33", "0.33", (str(tree["project"]),)))
    sh.quiet(f"export MPSD_CONFIG_DIR='{other}'")
    assert sh.values() == ("0.33", "0.33")


@pytest.mark.parametrize("kind", KINDS)
def test_a_value_set_by_hand_is_kept_inside_and_after_leaving(
    kind: str, tree: dict[str, Path], shells: list[Shell]
) -> None:
    sh = start(shells, kind, tree)
    sh.quiet(f"export {HIGH}=0.5")
    sh.quiet(f"cd '{tree['project']}'")
    assert sh.values() == ("0.5", "unset")
    sh.quiet(f"cd '{tree['outside']}'")
    assert sh.values() == ("0.5", "unset")
    sh.unset(HIGH)
    # Set by hand while inside, over the hook's own export: still the user's.
    sh.quiet(f"cd '{tree['project']}'")
    assert sh.values() == ("0.77", "0.7")
    sh.quiet(f"export {LOW}=0.3")
    sh.quiet("")
    assert sh.values() == ("0.77", "0.3")
    sh.quiet(f"cd '{tree['outside']}'")
    assert sh.values() == ("0.77", "0.3")


@pytest.mark.parametrize("kind", KINDS)
def test_leaving_takes_back_what_the_hook_exported(
    kind: str, tree: dict[str, Path], shells: list[Shell]
) -> None:
    sh = start(shells, kind, tree)
    sh.quiet(f"cd '{tree['project']}'")
    assert sh.values() == ("0.77", "0.7")
    sh.quiet("cd ..")
    assert sh.values() == ("unset", "unset")
    output, _ = sh.run("env | grep -c _MPSD_EXPORTED_ || true")
    assert output == ["0"]


HOSTILE = {
    "command substitution": ("$(touch {pwned})", "0.5"),
    "backticks": ("`touch {pwned}`", "0.5"),
    "semicolon": ("0.5; touch {pwned}", "0.5"),
    "garbage": ("abc", "0.5"),
    "exponent": ("5e-1", "5e-1"),
    "hex": ("0x1", "0x1"),
    "negative": ("-0.5", "-0.5"),
    "above two": ("2.5", "0.5"),
    "zero removes the cap": ("0.0", "0.0"),
    "empty": ("", ""),
    "low above high": ("0.5", "0.6"),
    "quoted": ('"0.5"', '"0.5"'),
    "trailing space": ("0.5 ", "0.5"),
    "arithmetic injection": ("a[$(touch {pwned})]", "0.5"),
    "too many decimals": ("0.5000000001", "0.5"),
}


@pytest.mark.parametrize("kind", KINDS)
def test_hostile_limits_toml_is_never_run_and_never_exported(
    kind: str, tree: dict[str, Path], shells: list[Shell], tmp_path: Path
) -> None:
    pwned = tmp_path / "pwned"
    sh = start(shells, kind, tree)
    sh.quiet(f"cd '{tree['project']}'")
    assert sh.values() == ("0.77", "0.7")
    for name, (high, low) in HOSTILE.items():
        text = limits_text(
            high.format(pwned=pwned), low.format(pwned=pwned), (str(tree["project"]),)
        )
        write_limits(tree["config"], text)
        sh.quiet("")
        assert sh.values() == ("unset", "unset"), name
        write_limits(tree["config"], limits_text(projects=(str(tree["project"]),)))
        sh.quiet("")
        assert sh.values() == ("0.77", "0.7"), name
    # Hostile project lines and whole-file garbage.
    for text in (
        limits_text(projects=(f"$(touch {pwned})",)),
        limits_text(projects=(f'{tree["project"]}\\"; touch {pwned}; \\"',)),
        "$(touch " + str(pwned) + ")\n`touch " + str(pwned) + "`\n",
        "\x00\x01garbage\xff" * 50,
    ):
        write_limits(tree["config"], text)
        sh.quiet("")
        assert sh.values() == ("unset", "unset"), text
    (tree["config"] / "limits.toml").unlink()
    (tree["config"] / "limits.toml").mkdir()
    sh.quiet("")
    assert sh.values() == ("unset", "unset")
    assert not pwned.exists()


@pytest.mark.parametrize("kind", POSIX_KINDS)
def test_safe_under_set_u_and_errexit_and_keeps_the_exit_status(
    kind: str, tree: dict[str, Path], shells: list[Shell]
) -> None:
    sh = start(shells, kind, tree, before="set -u")
    sh.quiet(f"cd '{tree['project']}'")
    assert sh.values() == ("0.77", "0.7")
    assert sh.run("false")[1] == 1
    assert sh.run("(exit 7)")[1] == 7
    sh.quiet("set -eo pipefail")
    assert sh.run("! true")[1] == 1
    sh.quiet(f"cd '{tree['outside']}'")
    assert sh.values() == ("unset", "unset")
    # Even with PWD unset by the user, the next prompts print nothing.
    sh.quiet("unset PWD")
    sh.quiet("")
    sh.quiet(f"cd '{tree['project']}'")
    assert sh.values() == ("0.77", "0.7")
    assert sh.child.isalive()


@pytest.mark.parametrize("kind", KINDS)
def test_sourcing_twice_registers_once(
    kind: str, tree: dict[str, Path], shells: list[Shell]
) -> None:
    sh = start(shells, kind, tree)
    sh.quiet(f"source '{HOOKS[kind]}'")
    sh.quiet(f"source '{HOOKS[kind]}'")
    if kind == "bash":
        output, _ = sh.run('printf "<%s>\\n" "${PROMPT_COMMAND[@]}"')
        assert output == ["<_mpsd_hook>"]
    elif kind == "fish":
        output, _ = sh.run("functions --handlers | string match -r '.*_mpsd_hook.*'")
        assert sorted(" ".join(line.split()) for line in output) == [
            "PWD _mpsd_hook",
            "fish_prompt _mpsd_hook",
        ]
    else:
        output, _ = sh.run('print -r -- "<$precmd_functions>" "<$chpwd_functions>"')
        assert output == ["<_mpsd_hook> <_mpsd_hook>"]
    sh.quiet(f"cd '{tree['project']}'")
    assert sh.values() == ("0.77", "0.7")


@pytest.mark.parametrize("kind", KINDS)
def test_eval_of_mpsd_hook_output_works_like_sourcing(
    kind: str, tree: dict[str, Path], shells: list[Shell]
) -> None:
    sh = start(shells, kind, tree, load=False)
    if kind == "fish":
        sh.quiet(f"{sys.executable} -m mpsd hook fish | source")
    else:
        sh.quiet(f'eval "$({sys.executable} -m mpsd hook {kind})"')
    sh.quiet(f"cd '{tree['project']}'")
    assert sh.values() == ("0.77", "0.7")


def test_bash_prompt_command_as_a_string_keeps_the_users_commands(
    tree: dict[str, Path], shells: list[Shell]
) -> None:
    sh = start(shells, "bash", tree, before="n=0; PROMPT_COMMAND='last=$?; n=$((n+1))'")
    output, _ = sh.run('printf "<%s>\\n" "$PROMPT_COMMAND"')
    assert output == ["<_mpsd_hook;last=$?; n=$((n+1))>"]
    sh.quiet(f"cd '{tree['project']}'")
    assert sh.values() == ("0.77", "0.7")
    # The user's command still runs at every prompt and still sees the real exit status.
    sh.run("(exit 5)")
    output, _ = sh.run('echo "n=$n last=$last"')
    assert re.fullmatch(r"n=\d+ last=5", output[0]), output


def test_bash_prompt_command_as_an_array_keeps_every_element(
    tree: dict[str, Path], shells: list[Shell]
) -> None:
    sh = start(shells, "bash", tree, before="a=0 b=0; PROMPT_COMMAND=('a=$((a+1))' 'b=$((b+1))')")
    output, _ = sh.run('printf "<%s>\\n" "${PROMPT_COMMAND[@]}"')
    assert output == ["<_mpsd_hook;a=$((a+1))>", "<b=$((b+1))>"]
    sh.quiet(f"cd '{tree['project']}'")
    assert sh.values() == ("0.77", "0.7")
    output, _ = sh.run('echo "$a $b"')
    a, b = output[0].split()
    assert int(a) >= 3 and a == b


def test_bash_preexec_precmd_functions_are_used_when_present(
    tree: dict[str, Path], shells: list[Shell]
) -> None:
    fake_preexec = (
        "bash_preexec_imported=defined; precmd_functions=(); "
        '__bp_precmd() { local f; for f in "${precmd_functions[@]}"; do "$f"; done; }; '
        "PROMPT_COMMAND=__bp_precmd"
    )
    sh = start(shells, "bash", tree, before=fake_preexec)
    sh.quiet(f"source '{HOOKS['bash']}'")
    output, _ = sh.run('printf "<%s>\\n" "$PROMPT_COMMAND" "${precmd_functions[@]}"')
    assert output == ["<__bp_precmd>", "<_mpsd_hook>"]
    sh.quiet(f"cd '{tree['project']}'")
    assert sh.values() == ("0.77", "0.7")


def test_bash_hook_never_moves_the_shell_when_a_symlink_changes_under_it(
    tree: dict[str, Path], shells: list[Shell]
) -> None:
    # A `current -> releases/1` link switched to `releases/2` on the line that cd'ed through it:
    # the shell is in releases/1, and the hook must not take it to releases/2.
    base = tree["outside"].parent
    for name in ("1", "2"):
        (base / "releases" / name).mkdir(parents=True)
        (base / "releases" / name / f"in-{name}").touch()
    current = base / "current"
    current.symlink_to(base / "releases" / "1")
    sh = start(shells, "bash", tree)
    sh.quiet(f"cd '{current}' && ln -sfn '{base / 'releases' / '2'}' '{current}'")
    assert sh.run("echo in-*")[0] == ["in-1"]


def test_bash_hook_sourced_again_after_bash_preexec_wrapped_it_registers_once(
    tree: dict[str, Path], shells: list[Shell]
) -> None:
    # .bashrc loads the hook, then bash-preexec (which keeps PROMPT_COMMAND's commands); then
    # `source ~/.bashrc` loads the hook again.
    sh = start(shells, "bash", tree)
    sh.quiet(
        "bash_preexec_imported=defined; precmd_functions=(); "
        '__bp_precmd() { local f; for f in "${precmd_functions[@]}"; do "$f"; done; }; '
        'PROMPT_COMMAND="__bp_precmd;$PROMPT_COMMAND"'
    )
    sh.quiet(f"source '{HOOKS['bash']}'")
    output, _ = sh.run('printf "<%s>\\n" "$PROMPT_COMMAND" "${#precmd_functions[@]}"')
    assert output == ["<__bp_precmd;_mpsd_hook>", "<0>"]


def test_bash_hook_leaves_the_users_options_and_traps_alone(
    tree: dict[str, Path], shells: list[Shell]
) -> None:
    sh = start(shells, "bash", tree, before="shopt -s nocasematch; trap 'echo t' USR1")
    before, _ = sh.run("shopt -p; set +o; trap -p")
    sh.quiet(f"cd '{tree['project']}'")
    sh.quiet(f"cd '{tree['outside']}'")
    after, _ = sh.run("shopt -p; set +o; trap -p")
    assert before == after
    # A case-insensitive match must not let a differently cased directory in.
    upper = tree["outside"].parent / "DIFFUSION"
    upper.mkdir()
    sh.quiet(f"cd '{upper}'")
    assert sh.values() == ("unset", "unset")


def test_zsh_hook_leaves_the_users_options_alone_and_serves_cd_on_one_line(
    tree: dict[str, Path], shells: list[Shell]
) -> None:
    sh = start(shells, "zsh", tree, before="setopt KSH_ARRAYS SH_WORD_SPLIT NO_UNSET")
    before, _ = sh.run("setopt; trap")
    # chpwd: a command on the same line as the cd already gets the values.
    output, _ = sh.run(f"cd '{tree['project']}' && printenv {HIGH}")
    assert output == ["0.77"]
    sh.quiet(f"cd '{tree['outside']}'")
    after, _ = sh.run("setopt; trap")
    assert before == after


@pytest.mark.parametrize("kind", KINDS)
def test_paths_with_spaces_and_unicode(
    kind: str, tree: dict[str, Path], shells: list[Shell]
) -> None:
    odd = tree["outside"].parent / "my projects" / "données ✓"
    (odd / "inner").mkdir(parents=True)
    write_limits(tree["config"], limits_text(projects=(str(odd),)))
    sh = start(shells, kind, tree)
    sh.quiet(f"cd '{odd / 'inner'}'")
    assert sh.values() == ("0.77", "0.7")
    sh.quiet(f"cd '{tree['outside'].parent / 'my projects'}'")
    assert sh.values() == ("unset", "unset")


def _forks(log: Path, start: str, end: str) -> list[str]:
    lines = log.read_text(errors="replace").splitlines()
    begin = next(i for i, line in enumerate(lines) if start in line)
    finish = next(i for i, line in enumerate(lines) if end in line and i > begin)
    return [
        line
        for line in lines[begin:finish]
        if re.search(r"\b(clone3?|fork|vfork|execve)\(", line) and "CLONE_THREAD" not in line
    ]


@pytest.mark.skipif(not available("strace"), reason="needs strace (.ci/run installs it)")
@pytest.mark.parametrize("kind", KINDS)
def test_no_subprocess_at_any_prompt(
    kind: str, tree: dict[str, Path], shells: list[Shell], tmp_path: Path
) -> None:
    log = tmp_path / "strace.log"
    marks = tmp_path / "marks"
    (marks / "start").mkdir(parents=True)
    (marks / "end").mkdir()
    # chdir (bash, zsh) or openat (fish: openat + fchdir) of the marker directories.
    argv = ["strace", "-f", "-e", "trace=process,chdir,openat", "-o", str(log), *ARGV[kind]]
    sh = start(shells, kind, tree, argv=argv)
    sh.quiet(f"cd '{marks / 'start'}'")
    for _ in range(5):
        sh.quiet("")
    sh.quiet(f"cd '{tree['project']}'")
    sh.quiet("")
    write_limits(tree["config"], limits_text("0.5", "0.5", (str(tree["project"]),)))
    sh.quiet("")
    sh.quiet(f"cd '{tree['sub']}'")
    # Files the hooks ignore: past the cap (in bytes, in two-byte characters), with a NUL.
    project = str(tree["project"])
    for filler in ("comments", "wide comments"):
        write_limits(tree["config"], padded_limits(LIMITS_CAP + 1, project, filler=filler))
        sh.quiet("")
    (tree["config"] / "limits.toml").write_bytes(limits_text(projects=(project,)).encode() + b"\0#")
    sh.quiet(f"cd '{tree['project']}'")
    sh.quiet(f"cd '{tree['sibling']}'")
    sh.quiet(f"cd '{marks / 'end'}'")
    wait_for(lambda: str(marks / "end") in log.read_text(errors="replace"), "the end mark")
    assert _forks(log, str(marks / "start"), str(marks / "end")) == []
    # The check can fail: a real subprocess between the marks is seen.
    sh.quiet(f"cd '{marks / 'start'}'; /bin/true; cd '{marks / 'end'}'")
    time.sleep(0.2)
    lines = log.read_text(errors="replace").splitlines()
    last_start = max(i for i, line in enumerate(lines) if str(marks / "start") in line)
    assert any("execve(" in line for line in lines[last_start:])


def test_bash_hook_uses_nothing_newer_than_bash_3_2() -> None:
    text = HOOKS["bash"].read_text()
    code = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))
    forbidden = {
        "associative arrays": r"declare\s+-A|local\s+-A|typeset\s+-A",
        "mapfile/readarray": r"\b(mapfile|readarray)\b",
        "case conversion": r"\$\{[^}]*(,,|\^\^)",
        "EPOCHREALTIME/EPOCHSECONDS": r"EPOCH(REALTIME|SECONDS)",
        "automatic fd allocation": r"\{[a-z_]+\}[<>]",
        "negative substring offsets": r"\$\{[^}]*:\s+-\d",
        "printf -v with %()T": r"%\(",
        "the ;;& and ;& case terminators": r";;&|;&",
        "coproc": r"\bcoproc\b",
        "wait -n": r"wait\s+-n",
        "declare -n namerefs": r"(declare|local|typeset)\s+-n",
        "the |& pipe": r"\|&",
        "&>> redirection": r"&>>",
        "globstar/lastpipe options": r"globstar|lastpipe",
        "command substitution (a fork)": r"\$\((?!\()|`",
        "negative array indices": r"\[\s*-\d+\s*\]",
        "${x@Q} transformations (4.4)": r"\$\{[^}]*@[QEPAaUuLK]\}",
        "declare -g (4.2)": r"(declare|typeset)\s+-\w*g",
        # Before bash 5, [0-9] follows the locale's collation and may let other digits in.
        "bracket ranges": r"\[!?[^]\[:\s]-[^]\s]",
    }
    found = {name: re.findall(pattern, code) for name, pattern in forbidden.items()}
    assert {name: hits for name, hits in found.items() if hits} == {}


def test_shellcheck_is_clean_on_the_bash_hook() -> None:
    if not available("shellcheck"):
        pytest.skip("needs shellcheck (.ci/run installs it)")
    result = subprocess.run(
        ["shellcheck", "--shell=bash", str(HOOKS["bash"])], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_zsh_hook_has_no_command_substitution_but_the_file_read() -> None:
    text = HOOKS["zsh"].read_text()
    code = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))
    # zsh reads `$(<file)` itself, without a subprocess (the strace test shows it).
    assert re.findall(r"\$\((?!\()[^)]*\)", code) == ["$(<$_MPSD_FILE)"]
    assert "`" not in code


@pytest.mark.parametrize("kind", KINDS)
def test_the_hook_finds_limits_toml_where_paths_py_puts_it(kind: str, tmp_path: Path) -> None:
    from mpsd import paths

    project = (tmp_path / "proj").resolve()
    project.mkdir()
    home = tmp_path / "h"
    cases = [
        {"MPSD_CONFIG_DIR": str(tmp_path / "direct")},
        # Pattern characters in the name: zsh checks the size with a glob of it.
        {"MPSD_CONFIG_DIR": str(tmp_path / "we [i]rd #(x|y)<1-2>^~*?=dir")},
        {"MPSD_CONFIG_DIR": "~/tilde"},
        {"XDG_CONFIG_HOME": str(tmp_path / "xdg")},
        {"XDG_CONFIG_HOME": "relative/ignored"},
        {},
    ]
    argv = SCRIPT_ARGV[kind]
    show = f"echo ${HIGH}" if kind == "fish" else f'echo "${{{HIGH}-unset}}"'
    script = f"source '{HOOKS[kind]}'; cd '{project}'; _mpsd_hook; {show}"
    for env in cases:
        full = {"HOME": str(home), "PATH": os.environ["PATH"], **env}
        saved = dict(os.environ)
        try:
            for key in ("MPSD_CONFIG_DIR", "XDG_CONFIG_HOME"):
                os.environ.pop(key, None)
            os.environ.update(full)
            where = paths.limits_file()
        finally:
            os.environ.clear()
            os.environ.update(saved)
        where.parent.mkdir(parents=True, exist_ok=True)
        where.write_text(limits_text("0.42", "0.42", (str(project),)))
        # In tmp_path: fish makes its config dir under a relative XDG_CONFIG_HOME too, which
        # would otherwise land in the checkout.
        out = subprocess.run(
            [*argv, script], env=full, capture_output=True, text=True, cwd=tmp_path
        )
        where.unlink()
        assert (out.stdout.strip(), out.stderr) == ("0.42", ""), env


@pytest.mark.skipif(os.getuid() != 0, reason="only root can give a directory to another user")
@pytest.mark.parametrize("kind", KINDS)
def test_a_config_or_data_dir_of_another_user_makes_the_hook_export_nothing(
    kind: str, tmp_path: Path
) -> None:
    project = (tmp_path / "proj").resolve()
    project.mkdir()
    home = tmp_path / "h"
    config = tmp_path / "config"
    config.mkdir()
    (config / "limits.toml").write_text(limits_text("0.42", "0.42", (str(project),)))
    show = (
        f"set -q {HIGH}; and echo ${HIGH}; or echo unset"
        if kind == "fish"
        else (f'echo "${{{HIGH}-unset}}"')
    )
    script = f"source '{HOOKS[kind]}'; cd '{project}'; _mpsd_hook; {show}"
    base = {"HOME": str(home), "PATH": os.environ["PATH"], "MPSD_CONFIG_DIR": str(config)}
    # Which dir is another user's, and the variables that put mpsd's data dir where it is.
    cases = [
        (config, {}),
        (tmp_path / "data", {"MPSD_DATA_DIR": str(tmp_path / "data")}),
        (tmp_path / "xdg" / "mps", {"XDG_DATA_HOME": str(tmp_path / "xdg")}),
        (home / ".local" / "share" / "mps", {}),
    ]

    def exported(env: dict[str, str]) -> str:
        done = subprocess.run(
            [*SCRIPT_ARGV[kind], script], env={**base, **env}, capture_output=True, text=True
        )
        assert done.stderr == ""
        return done.stdout.strip()

    for theirs, env in cases:
        theirs.mkdir(parents=True, exist_ok=True)
        assert exported(env) == "0.42", theirs
        os.chown(theirs, 65534, -1)
        assert exported(env) == "unset", theirs
        os.chown(theirs, 0, -1)


@pytest.mark.skipif(not available("strace"), reason="needs strace (.ci/run installs it)")
@pytest.mark.parametrize("kind", KINDS)
def test_loading_the_hook_starts_no_process(kind: str, tmp_path: Path) -> None:
    log = tmp_path / "strace.log"
    argv = SCRIPT_ARGV[kind]
    script = f"source '{HOOKS[kind]}'; source '{HOOKS[kind]}'; _mpsd_hook"
    trace = ["strace", "-f", "-qq", "-e", "trace=clone,clone3,fork,vfork,execve", "-o", str(log)]
    subprocess.run(
        [*trace, *argv, script],
        check=True,
        timeout=60,
    )
    calls = [
        line
        for line in log.read_text().splitlines()
        if "(" in line and "CLONE_THREAD" not in line  # fish starts a thread, not a process
    ]
    # Only the shell's own execve.
    assert len(calls) == 1 and "execve(" in calls[0], calls


@pytest.mark.skipif(not available("fish"), reason="no fish")
def test_fish_hook_keeps_the_status_the_prompt_shows(
    tree: dict[str, Path], shells: list[Shell]
) -> None:
    sh = start(shells, "fish", tree)
    sh.quiet(f"cd '{tree['project']}'")
    for command, shown in (("false", "1"), ("sh -c 'exit 7'", "7"), ("true", "0")):
        # fish_prompt records the $status it saw in _prompt_status (shells.Shell).
        sh.child.sendline(command)
        assert sh.run("echo $_prompt_status")[0] == [shown], command
    assert sh.values() == ("0.77", "0.7")
