"""The shell hooks against what a hostile-input campaign threw at them (issue 12), in real
interactive bash, zsh and fish: a long projects list, a huge limits.toml, directory names with
U+2028/U+2029, and the options users set in their rc files. Each prompt stays quiet and cheap,
and the exports stay right."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.shells import (
    HIGH,
    LIMITS_CAP,
    LOW,
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
needs_bash = pytest.mark.skipif(not available("bash"), reason="no bash")
needs_zsh = pytest.mark.skipif(not available("zsh"), reason="no zsh")


@pytest.fixture
def tree(tmp_path: Path, isolated_dirs: dict[str, Path]) -> dict[str, Path]:
    """A project (with a subdirectory), an outside directory, and the config dir."""
    base = tmp_path / "work"
    dirs = {
        "project": base / "diffusion",
        "sub": base / "diffusion" / "src",
        "outside": base / "elsewhere",
        "config": isolated_dirs["config"],
        "home": isolated_dirs["home"],
    }
    for key in ("sub", "outside", "config"):
        dirs[key].mkdir(parents=True, exist_ok=True)
    write_limits(dirs["config"], limits_text(projects=(str(dirs["project"]),)))
    return dirs


def write_limits(config: Path, text: str | bytes) -> None:
    tmp = config / ".limits.toml.tmp"
    tmp.write_bytes(text.encode() if isinstance(text, str) else text)
    os.replace(tmp, config / "limits.toml")


@pytest.fixture
def shells() -> Iterator[list[Shell]]:
    opened: list[Shell] = []
    yield opened
    for shell in opened:
        shell.child.close(force=True)


def start(shells: list[Shell], kind: str, tree: dict[str, Path], **kwargs: object) -> Shell:
    env = {"MPSD_CONFIG_DIR": str(tree["config"]), "HOME": str(tree["home"])}
    shell = Shell(kind, env, tree["outside"], **kwargs)  # type: ignore[arg-type]
    shells.append(shell)
    return shell


@pytest.mark.parametrize("kind", KINDS)
def test_the_largest_file_the_hooks_read_is_read_to_its_last_project(
    kind: str, tree: dict[str, Path], shells: list[Shell]
) -> None:
    # What a prompt costs with it (bash once took 79 s for a 1 MB list): bench/hook.py.
    sh = start(shells, kind, tree)
    write_limits(tree["config"], padded_limits(LIMITS_CAP, str(tree["project"])))
    sh.quiet(f"cd '{tree['sub']}'")
    assert sh.values() == ("0.77", "0.7")
    sh.quiet(f"cd '{tree['outside']}'")
    assert sh.values() == ("unset", "unset")


@pytest.mark.parametrize("kind", KINDS)
def test_a_limits_toml_larger_than_mpsd_writes_is_ignored_from_the_first_byte_past_the_cap(
    kind: str, tree: dict[str, Path], shells: list[Shell]
) -> None:
    project = str(tree["project"])
    sh = start(shells, kind, tree)
    sh.quiet(f"cd '{tree['project']}'")
    assert sh.values() == ("0.77", "0.7")
    # Exactly the cap: read. One byte more: ignored, whatever it holds.
    write_limits(tree["config"], padded_limits(LIMITS_CAP, project, filler="comments"))
    sh.quiet("")
    assert sh.values() == ("0.77", "0.7")
    write_limits(tree["config"], padded_limits(LIMITS_CAP + 1, project, filler="comments"))
    sh.quiet("")
    assert sh.values() == ("unset", "unset")
    assert sh.exported() == {}
    # Bytes, not characters: the same with two-byte characters (fewer than the cap of them).
    write_limits(tree["config"], padded_limits(LIMITS_CAP, project, filler="wide comments"))
    sh.quiet("")
    assert sh.values() == ("0.77", "0.7")
    write_limits(tree["config"], padded_limits(LIMITS_CAP + 1, project, filler="wide comments"))
    sh.quiet("")
    assert sh.values() == ("unset", "unset")
    write_limits(tree["config"], limits_text(projects=(project,)))
    sh.quiet("")
    assert sh.values() == ("0.77", "0.7")


@pytest.mark.parametrize("kind", KINDS)
def test_a_100_mb_limits_toml_is_ignored_quietly_at_builtin_cost(
    kind: str, tree: dict[str, Path], shells: list[Shell]
) -> None:
    # fish printed "Too much data emitted by command substitution" at each prompt (just past its
    # 100 MiB read limit, as here). Nothing printed, nothing exported; the cost of such a
    # prompt (bash once took 7 s) is bench/hook.py's.
    project = str(tree["project"])
    sh = start(shells, kind, tree)
    sh.quiet(f"cd '{tree['project']}'")
    assert sh.values() == ("0.77", "0.7")
    write_limits(tree["config"], padded_limits(101 * 2**20, project, filler="comments"))
    for command in (f"cd '{tree['outside']}'; cd '{tree['project']}'", "", ""):
        assert sh.run(command, timeout=120)[0] == [], command  # quiet
    assert sh.values() == ("unset", "unset")
    assert sh.exported() == {}
    # Back to a file mpsd writes: read again at the next prompt.
    write_limits(tree["config"], limits_text(projects=(project,)))
    sh.quiet("")
    assert sh.values() == ("0.77", "0.7")


@pytest.mark.parametrize("kind", KINDS)
def test_a_limits_toml_with_a_nul_byte_is_ignored(
    kind: str, tree: dict[str, Path], shells: list[Shell]
) -> None:
    # mpsd never writes one; the shells cannot all read past it. Ignored, like a broken file,
    # whatever comes after it (fish cannot see a NUL at the very end: not tested).
    project = str(tree["project"])
    sh = start(shells, kind, tree)
    sh.quiet(f"cd '{tree['project']}'")
    assert sh.values() == ("0.77", "0.7")
    good = limits_text(projects=(project,)).encode()
    for text in (good + b"\0# more\n", b"\0" + good, good.replace(b"headroom", b"head\0room")):
        write_limits(tree["config"], text)
        sh.quiet("")
        assert sh.values() == ("unset", "unset"), text
        write_limits(tree["config"], good)
        sh.quiet("")
        assert sh.values() == ("0.77", "0.7")


@pytest.mark.parametrize("kind", KINDS)
def test_directory_names_with_line_and_paragraph_separators(
    kind: str, tree: dict[str, Path], shells: list[Shell]
) -> None:
    # `mpsd enable` accepts U+2028, U+2029 (and U+0085, a C1 control): glibc's UTF-8 locales
    # count them as [[:cntrl:]], and the bash and zsh hooks refused such a directory.
    base = tree["outside"].parent
    odd = [base / "line\u2028sep", base / "para\u2029sep", base / "next\u0085line"]
    for path in odd:
        (path / "inner").mkdir(parents=True)
    write_limits(tree["config"], limits_text(projects=tuple(str(p) for p in odd)))
    sh = start(shells, kind, tree)
    for path in odd:
        sh.quiet(f"cd '{path}'")
        assert sh.values() == ("0.77", "0.7"), path
        sh.quiet(f"cd '{path / 'inner'}'")
        assert sh.values() == ("0.77", "0.7"), path
        sh.quiet(f"cd '{tree['outside']}'")
        assert sh.values() == ("unset", "unset"), path
    # Inside a project, in a directory that is itself refused (a tab): still inside.
    tabbed = odd[0] / "a\tb"
    tabbed.mkdir()
    sh.quiet(f"cd '{odd[0]}'; and cd a\\tb" if kind == "fish" else f"cd '{odd[0]}' && cd $'a\\tb'")
    assert sh.run("pwd")[0] == [str(tabbed)]
    assert sh.values() == ("0.77", "0.7")


# Each as the user's rc file would set it, before the hook is loaded.
BASH_OPTIONS = [
    "set -e",
    "set -u",
    "set -o pipefail",
    "shopt -s nocasematch",
    "shopt -s extglob",
    "shopt -s failglob",
    "shopt -s nullglob",
    "set -k",
    "set -a",
    "set -f",
    "set -o posix",
    # An ERR trap that reaches into functions: the hook runs no failing command outside a test.
    "set -E; trap 'echo ERR' ERR",
    "set -euk -o pipefail; shopt -s nocasematch extglob failglob nullglob",
]
ZSH_OPTIONS = [
    "setopt ksh_arrays",
    "setopt no_unset",
    "setopt err_exit",
    "setopt sh_word_split",
    "setopt all_export",
    "setopt warn_create_global",
    "TRAPZERR() { print ZERR; }",
    "setopt ksh_arrays no_unset err_exit sh_word_split",
]


def check_under_options(sh: Shell, tree: dict[str, Path], errexit: bool) -> None:
    """Quiet prompts (nothing on stdout or stderr: both go to the terminal), right exports,
    the exit status kept, and nothing of the hook's own in a child's environment."""
    # Files in the directories, for the glob options to bite on.
    for d in (tree["project"], tree["outside"]):
        (d / "lines1").touch()
        (d / "_mpsd_lines").touch()
    sh.quiet("")
    sh.quiet(f"cd '{tree['project']}'")
    assert sh.values() == ("0.77", "0.7")
    assert sh.exported() == {HIGH: "0.77", LOW: "0.7"}
    sh.quiet(f"cd '{tree['sub']}'")
    assert sh.values() == ("0.77", "0.7")
    write_limits(tree["config"], limits_text("0.5", "0.5", (str(tree["project"]),)))
    sh.quiet("")
    assert sh.values() == ("0.5", "0.5")
    if not errexit:
        assert sh.run("false")[1] == 1
    assert sh.run("(exit 0)")[1] == 0
    output, _ = sh.run("env | grep -c '^_MPSD_' || true")
    assert output == ["2"], "only _MPSD_EXPORTED_HIGH and _MPSD_EXPORTED_LOW are exported"
    sh.quiet(f"cd '{tree['outside']}'")
    assert sh.values() == ("unset", "unset")
    assert sh.exported() == {}
    assert sh.child.isalive()


@needs_bash
@pytest.mark.parametrize("options", BASH_OPTIONS)
def test_bash_hook_under_the_users_options(
    options: str, tree: dict[str, Path], shells: list[Shell]
) -> None:
    # `set -k` printed "return: : numeric argument required" at every prompt.
    sh = start(shells, "bash", tree, before=options)
    before, _ = sh.run("echo $-; shopt -p")
    check_under_options(sh, tree, errexit=options.startswith("set -e"))
    after, _ = sh.run("echo $-; shopt -p")
    assert before == after


@needs_zsh
@pytest.mark.parametrize("options", ZSH_OPTIONS)
def test_zsh_hook_under_the_users_options(
    options: str, tree: dict[str, Path], shells: list[Shell]
) -> None:
    sh = start(shells, "zsh", tree, before=options)
    before, _ = sh.run("setopt")
    check_under_options(sh, tree, errexit="err_exit" in options)
    after, _ = sh.run("setopt")
    assert before == after
