"""The one reader of limits.toml: the hooks' semantics, and the writer's form pinned.

The writer's output is checked line by line against the grammar the shell hooks parse (not
against what a TOML library happens to accept), and every hand edit the hooks would read
differently is a problem the reader names.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import os
from dataclasses import replace
from pathlib import Path

import pytest
import tomli_w
from hypothesis import example, given, settings
from hypothesis import strategies as st

from mpsd import limits
from mpsd._toml import tomllib
from mpsd.errors import MpsdError
from tests.installkit import sample_limits

SAMPLE = sample_limits(projects=("/Users/me/code/diffusion", "/Users/me/other"))
HOOK_LINE_FORMS = (
    "key = plain value",
    "project line: four spaces, a double-quoted absolute path, a comma",
)


def _is_hook_form(line: str) -> bool:
    """One line of the form the hooks parse (docs/file-formats.md)."""
    if line in ("projects = [", "projects = []", "]"):
        return True
    if line.startswith('    "/') and line.endswith('",'):
        return '"' not in line[5:-2] and "\\" not in line[5:-2]
    key, sep, value = line.partition(" = ")
    return bool(sep) and key.isidentifier() and value != "" and "#" not in value


ratios = st.integers(min_value=1, max_value=200).map(lambda n: n / 100)
paths = st.lists(
    st.text(
        alphabet=st.characters(blacklist_characters='"\\', blacklist_categories=("Cc", "Cs")),
        min_size=1,
        max_size=20,
    ).map(lambda s: "/" + s.replace("\n", "")),
    max_size=4,
    unique=True,
)


@settings(deadline=None, max_examples=200)
@example(high=0.5, low_share=100, projects=["/\u2028", "/a\x85b"], source=limits.SOURCES[0])
@given(
    high=ratios,
    low_share=st.integers(1, 100),
    projects=paths,
    source=st.sampled_from(limits.SOURCES),
)
def test_whatever_the_writer_writes_the_hooks_read_in_full(high, low_share, projects, source):
    low = max(0.01, int(high * low_share) / 100)
    value = replace(
        SAMPLE,
        high_watermark_ratio=high,
        low_watermark_ratio=min(low, high),
        projects=tuple(projects),
        recommended_max_source=source,
    )
    text = limits.render(value)
    assert text == tomli_w.dumps({**dataclasses.asdict(value), "projects": list(projects)})
    # Lines as the hooks split them: at "\n" only (str.splitlines also breaks at U+2028,
    # U+0085 and the like, which a project path may hold).
    assert text.endswith("\n")
    assert all(_is_hook_form(line) for line in text[:-1].split("\n")), text
    read = limits.parse_text(text)
    assert read.problem is None
    assert read.limits == value
    assert read.exports
    assert (float(read.high or 0), float(read.low or 0)) == (
        value.high_watermark_ratio,
        value.low_watermark_ratio,
    )
    assert read.projects == value.projects


@pytest.mark.parametrize(
    ("edit", "exports"),
    [
        # A trailing comment: TOML would read 0.77, the hooks read nothing.
        (
            lambda t: t.replace(
                "high_watermark_ratio = 0.77", "high_watermark_ratio = 0.77 # note"
            ),
            False,
        ),
        (lambda t: t.replace("high_watermark_ratio = 0.77", "high_watermark_ratio=0.77"), False),
        (lambda t: t.replace("low_watermark_ratio = 0.77", "low_watermark_ratio = 0.770"), True),
        (lambda t: "# my notes\n" + t, True),
        (lambda t: t.replace("headroom = 0.8", "headroom = 0.8\nextra = 1"), True),
        (lambda t: t.replace('    "/Users/me/other",\n', '    "/Users/me/other" ,\n'), True),
        (lambda t: t.replace("high_watermark_ratio = 0.77", "high_watermark_ratio = 2.5"), False),
        (lambda t: t.replace("low_watermark_ratio = 0.77", "low_watermark_ratio = 0.9"), False),
        (lambda t: t.replace("limit_bytes", "limit_byte"), True),
        (lambda t: t.replace("0.77", "nan"), False),
        (lambda t: t.replace("limit_bytes = 30954687948", "limit_bytes = " + "9" * 400), True),
        (lambda t: t.replace("]\n", ""), True),
    ],
)
def test_a_file_not_in_the_writers_form_is_a_problem_and_gives_no_limits(edit, exports):
    text = edit(limits.render(SAMPLE))
    read = limits.parse_text(text)
    assert read.limits is None
    assert read.problem is not None and read.problem.startswith("limits.toml is not in mpsd's form")
    assert read.exports is exports
    with pytest.raises(limits.LimitsError):
        limits.parse(text)


def test_a_project_path_the_hooks_cannot_read_is_valid_toml_and_a_problem():
    value = replace(SAMPLE, projects=('/Users/me/"q"\\\t\x7f',))
    text = limits.render(value)
    assert text == tomli_w.dumps({**dataclasses.asdict(value), "projects": list(value.projects)})
    assert tomllib.loads(text)["projects"] == list(value.projects)
    read = limits.parse_text(text)
    assert read.limits is None and read.projects == ()
    assert read.problem is not None and "is not as mpsd writes it" in read.problem


def test_the_hooks_view_of_a_hand_edited_file_is_what_the_hooks_export():
    text = limits.render(SAMPLE).replace("low_watermark_ratio = 0.77", "low_watermark_ratio = 0.5")
    read = limits.parse_text(text + "# a comment the hooks skip\n")
    assert (read.high, read.low) == ("0.77", "0.5")
    assert read.projects == SAMPLE.projects


def test_a_missing_file_is_absent_not_a_problem(tmp_path: Path):
    read = limits.read_file(tmp_path / "limits.toml")
    assert (read.found, read.problem, read.limits) == (False, None, None)


def test_a_fifo_in_place_of_the_file_is_a_problem_not_a_hang(tmp_path: Path):
    fifo = tmp_path / "limits.toml"
    os.mkfifo(fifo)
    read = limits.read_file(fifo)
    assert read.found and read.problem == f"{fifo} is not a regular file"
    assert read.limits is None and not read.exports


def test_a_file_larger_than_mpsd_ever_writes_is_ignored(tmp_path: Path):
    path = tmp_path / "limits.toml"
    path.write_text(limits.render(SAMPLE) + "#" * limits.MAX_BYTES)
    read = limits.read_file(path)
    assert read.problem is not None and "larger than mpsd ever writes" in read.problem
    assert not read.exports and read.projects == ()


def test_read_and_write_round_trip_through_the_file(tmp_path: Path):
    path = tmp_path / "limits.toml"
    value = replace(
        SAMPLE, updated_at=dt.datetime(2026, 12, 1, 18, 0, 5, 123456, tzinfo=dt.timezone.utc)
    )
    assert limits.write(value, path)
    assert limits.read(path) == value


def test_a_nul_byte_makes_the_hooks_ignore_the_file_and_so_the_reader():
    read = limits.parse_text(limits.render(SAMPLE) + "\x00")
    assert read.problem == "limits.toml holds a NUL byte, so the hooks ignore it"
    assert not read.exports and read.projects == () and read.limits is None


def test_the_writer_refuses_a_file_larger_than_the_hooks_read(tmp_path: Path):
    many = tuple(f"/Users/me/projects/{'x' * 200}/{n}" for n in range(1500))
    with pytest.raises(MpsdError, match="more than the 256 KiB the shell hooks read"):
        limits.write(dataclasses.replace(SAMPLE, projects=many), tmp_path / "limits.toml")
    assert not (tmp_path / "limits.toml").exists()
