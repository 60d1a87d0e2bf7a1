"""The opt-in list: physical paths, refused characters, add/remove."""

from __future__ import annotations

from pathlib import Path

import pytest

from mpsd.env import projects


def test_paths_become_physical(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = tmp_path / "real" / "proj"
    real.mkdir(parents=True)
    (tmp_path / "link").symlink_to(real)
    resolved = str(real.resolve())
    assert projects.physical(str(tmp_path / "link")) == resolved
    assert projects.physical(str(tmp_path / "link") + "/") == resolved
    assert projects.physical(str(real / ".." / "proj")) == resolved
    monkeypatch.chdir(real)
    assert projects.physical(".") == resolved


@pytest.mark.parametrize(
    ("path", "word"),
    [('/a"b', "double quote"), ("/a\\b", "backslash"), ("/a\nb", "control"), ("/a\tb", "control"),
     ("/a\x7fb", "control"), ("/a\x85b", "control"), ("/a\udcffb", "UTF-8")],
)  # fmt: skip
def test_characters_the_hooks_cannot_read_safely_are_refused(path: str, word: str) -> None:
    problem = projects.problem(path)
    assert problem is not None and word in problem


@pytest.mark.parametrize("path", ["/a b/c", "/données/✓", "/x-y_z.1", "/"])
def test_spaces_and_unicode_are_fine(path: str) -> None:
    assert projects.problem(path) is None


def test_add_and_remove_keep_order_and_are_idempotent(tmp_path: Path) -> None:
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    assert projects.add((a,), b) == (a, b)
    assert projects.add((a, b), a) == (a, b)
    assert projects.remove((a, b), a) == (b,)
    assert projects.remove((b,), a) == (b,)


def test_for_limits_resolves_dedupes_and_drops_unsafe_entries(tmp_path: Path) -> None:
    real = tmp_path / "p"
    real.mkdir()
    (tmp_path / "l").symlink_to(real)
    entries = [str(real), str(tmp_path / "l"), str(tmp_path / 'bad"q')]
    assert projects.for_limits(entries) == (str(real.resolve()),)


def test_for_limits_sorts_the_projects_for_the_start_up_hooks_binary_search() -> None:
    entries = ["/z/b", "/a", "/z/a", "/a-b", "/a/c"]
    assert projects.for_limits(entries) == ("/a", "/a-b", "/a/c", "/z/a", "/z/b")
