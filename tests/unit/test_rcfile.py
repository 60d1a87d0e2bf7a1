"""The marked block in rc files: added once at the end, replaced in place, removed byte for byte."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mpsd.setup import rcfile

HOOK = Path("/data/mps/mpsd.zsh")
BLOCK = rcfile.block("zsh", HOOK)
NEWER = rcfile.block("zsh", Path("/elsewhere/mpsd.zsh"))

# Arbitrary user bytes, any encoding, with or without a final newline; never a marker line.
user_bytes = st.binary(max_size=300).filter(lambda b: b"mpsd" not in b)
user_text = st.lists(
    st.sampled_from([b"alias ll='ls -l'", b"", b"  # comment", b"export A=1\r", b"\xff\xfe"]),
    max_size=8,
).map(b"\n".join)


@settings(deadline=None, max_examples=200)
@given(st.one_of(user_bytes, user_text))
def test_removing_the_block_gives_back_every_user_byte(text: bytes) -> None:
    added = rcfile.add(text, BLOCK)
    assert added.startswith(text)
    assert added.endswith(BLOCK)
    assert rcfile.remove(added) == text


@settings(deadline=None, max_examples=100)
@given(st.one_of(user_bytes, user_text))
def test_adding_twice_is_adding_once(text: bytes) -> None:
    once = rcfile.add(text, BLOCK)
    assert rcfile.add(once, BLOCK) == once
    assert len(rcfile.find(once)) == 1


@settings(deadline=None, max_examples=100)
@given(st.one_of(user_bytes, user_text), user_text)
def test_an_outdated_block_is_replaced_in_place_keeping_lines_after_it(
    text: bytes, later: bytes
) -> None:
    added = rcfile.add(text, BLOCK) + later
    updated = rcfile.add(added, NEWER)
    assert updated == rcfile.add(text, NEWER) + later
    assert rcfile.remove(updated) == rcfile.remove(added)


def test_a_file_without_a_final_newline_gets_one_line_break_and_loses_it_again() -> None:
    added = rcfile.add(b"export X=1", BLOCK)
    assert added == b"export X=1\n" + BLOCK
    assert rcfile.remove(added) == b"export X=1"


def test_a_file_with_a_final_newline_gets_a_blank_line_before_the_block() -> None:
    added = rcfile.add(b"export X=1\n", BLOCK)
    assert added == b"export X=1\n\n" + BLOCK
    assert rcfile.remove(added) == b"export X=1\n"


def test_an_empty_file_gets_the_block_alone() -> None:
    assert rcfile.add(b"", BLOCK) == BLOCK
    assert rcfile.remove(BLOCK) == b""


def test_a_block_moved_between_user_lines_never_joins_them() -> None:
    text = b"a=1\n" + BLOCK + b"b=2\n"
    assert rcfile.remove(text) == b"a=1\nb=2\n"


def test_extra_copies_of_the_block_are_folded_into_one() -> None:
    text = b"x\n\n" + BLOCK + b"y\n\n" + BLOCK
    updated = rcfile.add(text, NEWER)
    assert rcfile.find(updated) == [rcfile.Span(3, 3 + len(NEWER))]
    assert updated == b"x\n\n" + NEWER + b"y\n"


def test_a_begin_marker_without_its_end_is_refused_with_what_to_do() -> None:
    damaged = b"x\n" + rcfile.BEGIN + b"\nsource something\n"
    with pytest.raises(rcfile.RcFileError, match="without its end marker; remove the lines"):
        rcfile.add(damaged, BLOCK)
    with pytest.raises(rcfile.RcFileError):
        rcfile.remove(damaged)


def test_markers_inside_a_line_are_not_a_block() -> None:
    text = b"echo '# >>> mpsd >>>'\n"
    assert rcfile.find(text) == []
    assert rcfile.remove(text) == text


def test_the_block_says_when_install_created_the_file() -> None:
    created = rcfile.block("bash", HOOK, created=True)
    assert rcfile.created_by_mpsd(created)
    assert not rcfile.created_by_mpsd(rcfile.add(b"x\n", BLOCK))


def test_a_hook_copy_under_home_is_named_through_home() -> None:
    line = rcfile.block("zsh", Path("/Users/me/.local/share/mps/mpsd.zsh"), "/Users/me")
    word = b'"$HOME/.local/share/mps/mpsd.zsh"'
    guard = b"[ -f " + word + b" ] && [ -O " + word + b" ]"
    assert b"if " + guard + b"; then . " + word + b"; fi\n" in line


@pytest.mark.parametrize("shell", ["bash", "zsh"])
def test_the_block_sources_the_hook_even_from_an_awkward_path(tmp_path: Path, shell: str) -> None:
    if shutil.which(shell) is None:
        pytest.skip(f"{shell} is not installed")
    odd = tmp_path / "it's a dir $HOME `x`"
    odd.mkdir()
    hook = odd / f"mpsd.{shell}"
    hook.write_text("echo hooked\n")
    rc = tmp_path / "rc"
    rc.write_bytes(rcfile.add(b"echo before\n", rcfile.block(shell, hook, str(tmp_path))))
    done = subprocess.run(
        [shell, "-c", f". '{rc}'"], capture_output=True, text=True, timeout=30, check=False
    )
    assert done.stdout == "before\nhooked\n"
    assert done.stderr == ""
    hook.unlink()  # the guard: a removed hook copy makes the block do nothing, quietly
    done = subprocess.run(
        [shell, "-c", f". '{rc}'"], capture_output=True, text=True, timeout=30, check=False
    )
    assert (done.stdout, done.stderr, done.returncode) == ("before\n", "", 0)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (b"[ -f ~/.bashrc ] && . ~/.bashrc\n", True),
        (b'if [ -f "$HOME/.bashrc" ]; then\n  source "$HOME/.bashrc"\nfi\n', True),
        (b"test -r ~/.bashrc && . ~/.bashrc # load it\n", True),
        (b"# . ~/.bashrc\n", False),
        (b"export PATH=/opt/bin:$PATH\n", False),
        (b". ~/.bashrc_local\n", False),
    ],
)
def test_it_knows_when_a_login_file_already_sources_bashrc(text: bytes, expected: bool) -> None:
    assert rcfile.sources_bashrc(text) is expected


def _names(files: list[Path]) -> list[str]:
    return [f.name for f in files]


def test_zsh_uses_zdotdir_when_set(tmp_path: Path) -> None:
    assert rcfile.rc_files("zsh", tmp_path, {}) == [tmp_path / ".zshrc"]
    zdot = tmp_path / "zdot"
    assert rcfile.rc_files("zsh", tmp_path, {"ZDOTDIR": str(zdot)}) == [zdot / ".zshrc"]


def test_on_macos_login_bash_gets_a_bash_profile_when_it_reads_none(tmp_path: Path) -> None:
    files = rcfile.rc_files("bash", tmp_path, {}, platform="darwin")
    assert _names(files) == [".bashrc", ".bash_profile"]


def test_on_macos_a_profile_only_home_gets_the_block_in_profile_not_a_new_bash_profile(
    tmp_path: Path,
) -> None:
    (tmp_path / ".profile").write_text("export EDITOR=vi\n")
    files = rcfile.rc_files("bash", tmp_path, {}, platform="darwin")
    assert _names(files) == [".bashrc", ".profile"]


def test_a_bash_profile_that_sources_bashrc_gets_no_second_block(tmp_path: Path) -> None:
    (tmp_path / ".bash_profile").write_text("[ -f ~/.bashrc ] && . ~/.bashrc\n")
    for platform in ("darwin", "linux"):
        assert _names(rcfile.rc_files("bash", tmp_path, {}, platform=platform)) == [".bashrc"]


def test_on_linux_only_an_existing_bash_profile_that_skips_bashrc_gets_the_block(
    tmp_path: Path,
) -> None:
    assert _names(rcfile.rc_files("bash", tmp_path, {}, platform="linux")) == [".bashrc"]
    (tmp_path / ".profile").write_text("export A=1\n")
    assert _names(rcfile.rc_files("bash", tmp_path, {}, platform="linux")) == [".bashrc"]
    (tmp_path / ".bash_profile").write_text("export A=1\n")
    files = rcfile.rc_files("bash", tmp_path, {}, platform="linux")
    assert _names(files) == [".bashrc", ".bash_profile"]


def test_a_broken_symlink_rc_file_is_refused(tmp_path: Path) -> None:
    link = tmp_path / ".bashrc"
    os.symlink(tmp_path / "dotfiles" / "bashrc", link)
    with pytest.raises(rcfile.RcFileError, match="does not exist; fix or remove the link"):
        rcfile.read(link)


@pytest.mark.parametrize("shell", ["zsh", "bash"])
@pytest.mark.parametrize("copy", ["/home/u/.local/share/mps/mpsd.x", "/opt/it's here/mpsd.x"])
def test_the_sourced_hook_copy_is_read_back_from_the_block(shell: str, copy: str) -> None:
    text = b"export A=1\n" + rcfile.block(shell, Path(copy), "/home/u")
    assert rcfile.sourced_files(text, "/home/u") == [copy]
