"""mpsd.flat_toml reads mpsd's flat TOML exactly as tomllib does, and leaves the rest to it."""

from __future__ import annotations

import datetime as dt

import pytest
import tomli_w
from hypothesis import given, settings
from hypothesis import strategies as st

from mpsd import flat_toml, limits
from mpsd._toml import tomllib
from mpsd.config import default_config_text

KEYS = st.text("abcxyz_-019", min_size=1, max_size=8)
STRINGS = st.text(st.characters(codec="utf-8", exclude_characters='"\\'), max_size=12)
VALUES = st.one_of(
    st.integers(-(10**15), 10**15),
    st.floats(allow_nan=False, allow_infinity=False, min_value=-1e6, max_value=1e6),
    st.booleans(),
    STRINGS,
    st.lists(STRINGS, max_size=3),
    st.datetimes(min_value=dt.datetime(1970, 1, 2), timezones=st.just(dt.timezone.utc)),
)


def same(text: str) -> None:
    """flat_toml.loads(text) is tomllib.loads(text), errors included."""
    try:
        expected = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        with pytest.raises(tomllib.TOMLDecodeError):
            flat_toml.loads(text)
        return
    assert flat_toml.loads(text) == expected


def test_what_mpsd_writes_is_read_without_tomllib() -> None:
    written = limits.Limits(
        0.77, 0.7, 1 << 34, 1 << 35, "torch", 1 << 33, 0.8,
        dt.datetime(2026, 11, 30, 7, 1, 59, 123456, tzinfo=dt.timezone.utc), ("/a b", "/ü"),
    )  # fmt: skip
    for text in (limits.render(written), default_config_text()):
        assert flat_toml._flat(text) == tomllib.loads(text)  # the fast path, no fallback
    assert limits.parse(limits.render(written)) == written


@settings(deadline=None, max_examples=200)
@given(st.dictionaries(KEYS, VALUES, max_size=6))
def test_documents_tomli_w_writes_read_the_same(data: dict[str, object]) -> None:
    same(tomli_w.dumps(data))
    same(tomli_w.dumps(data, multiline_strings=False).replace("\n", "\n# note\n\n"))


@pytest.mark.parametrize(
    "text",
    [
        "a = 1 # comment\n",
        "a = 0x10\n",
        "a = 1_000\n",
        "a = 1e5\n",
        "a = +1\n",
        "a = 01\n",
        "a = inf\n",
        "a = 'literal'\n",
        'a = "esc\\"aped"\n',
        'a = """multi\nline"""\n',
        "a = [1, 2]\n",
        'a = [\n  "x",\n  "y"\n]\n',
        'a = ["x",]\n',
        "a = { b = 1 }\n",
        "[table]\nb = 1\n",
        "a.b = 1\n",
        "a=1\n",
        "  a = 1\n",
        "a = 1\r\nb = 2\r\n",
        "a = 1\na = 2\n",
        "a = \n",
        "a = 2026-11-30 07:01:59\n",
        "a = 2026-11-30T07:01:59Z\n",
        "a = 2026-11-30 07:01:59.5+01:00\n",
        "a = 2026-02-30 07:01:59+00:00\n",
        "a = 2026-11-30 25:01:59+00:00\n",
        "a = 1979-05-27\n",
        'a = "tab\there"\n',
        "a = true\nb = false\n",
        "projects = [\n",
        "\ufeffa = 1\n",
    ],
)
def test_anything_else_reads_as_tomllib_reads_it(text: str) -> None:
    same(text)
