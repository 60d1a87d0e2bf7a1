"""The arithmetic explain prints holds: every "A = r x B" is true at the precision printed, and
"That is mpsd's value" is said exactly when mpsd's ratio gives the message's cap.

PyTorch's cap is ratio x recommended max, cut to bytes, printed with two decimals
(docs/macos-and-pytorch.md): a cap printed "18.13 GiB" is one in [18.125, 18.135] GiB.
"""

from __future__ import annotations

import re

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from mpsd.oom import find_errors, macs
from mpsd.oom.known import Known
from mpsd.oom.render import render
from mpsd.oom.units import format_size, to_bytes

GIB = 1 << 30
SIZE = r"(\d+\.\d+) ([KMGT]iB)"
# "18.13 GiB = 0.906 x 20.01 GiB", the guesses' "   or 0.85 x 21.33 GiB" (the same cap),
# and the fix's "a cap of 18.21 GiB (0.91 x 20.01 GiB".
EQUATION = re.compile(rf"{SIZE} = (\d+(?:\.\d+)?) x {SIZE}")
OR_LINE = re.compile(rf"^\s+or (\d+(?:\.\d+)?) x {SIZE}")
CAP_OF = re.compile(rf"a cap of (?:about )?{SIZE} \((\d+(?:\.\d+)?) x {SIZE}")


def _interval(number: str, unit: str) -> tuple[float, float]:
    """The true values a printed size stands for (its last digit's rounding, plus a byte)."""
    parsed = to_bytes(number, unit)
    assert parsed is not None
    value, half = parsed
    return value - half - 1, value + half + 1


def _holds(a: tuple[str, str], ratio: str, b: tuple[str, str]) -> bool:
    """Some cap a and max b, each within its printed rounding, have a = ratio x b."""
    a_lo, a_hi = _interval(*a)
    b_lo, b_hi = _interval(*b)
    r = float(ratio)
    return r * b_lo <= a_hi and a_lo <= r * b_hi


def equations(text: str) -> list[tuple[tuple[str, str], str, tuple[str, str]]]:
    """Every "A = r x B" the text states (with A carried to the "or" lines below it)."""
    found = []
    last: tuple[str, str] | None = None
    for line in text.splitlines():
        for m in EQUATION.finditer(line):
            last = (m[1], m[2])
            found.append((last, m[3], (m[4], m[5])))
        m = OR_LINE.match(line)
        if m and last is not None:
            found.append((last, m[1], (m[2], m[3])))
        for m in CAP_OF.finditer(line):
            found.append(((m[1], m[2]), m[3], (m[4], m[5])))
    return found


def pytorch_cap(ratio: float, recommended: int) -> int:
    """MPSAllocator.mm: static_cast<size_t>(high_watermark_ratio * recommendedMaxWorkingSetSize)."""
    return int(ratio * recommended)


def message(cap: int, binary: bool = False) -> str:
    size = format_size(cap, binary=binary)
    return (
        "RuntimeError: MPS backend out of memory (MPS allocated: 1.00 GB, other allocations: "
        f"1.00 MB, max allowed: {size}). Tried to allocate 2.00 MB on private pool."
    )


def known(high: float, recommended: int, source: str = "metal") -> Known:
    return Known(high, high, int(high * recommended), recommended, 400 * GIB, source)


def unwrapped(text: str) -> str:
    """The text with its wrapped lines joined back (explain wraps at 88 columns)."""
    return re.sub(r"\n +(?=[^ ])", " ", text)


def test_the_readme_sample_against_091_of_2001_gib_is_not_mpsds_value() -> None:
    # 0.91 x 20.01 GiB = 18.21 GiB; the sample's 18.13 GiB is 0.906 x 20.01 GiB.
    sample = message(round(18.13 * GIB))
    out = unwrapped(render(find_errors(sample), known(0.91, round(20.01 * GIB))))
    assert "18.13 GiB = 0.906 x 20.01 GiB (this Mac's recommended maximum" in out
    assert (
        "No ratio of two decimals gives this cap on this Mac, so it is not mpsd's value (0.91)"
        in out
    )
    assert "That is mpsd's value" not in out
    assert "18.13 GiB = 0.91 x" not in out
    assert "a cap of 18.21 GiB (0.91 x 20.01 GiB)" in out


def test_the_readme_sample_against_an_estimate_says_about_and_cannot_tell() -> None:
    sample = message(round(18.13 * GIB))
    out = unwrapped(render(find_errors(sample), known(0.91, round(20.01 * GIB), "estimate")))
    assert "18.13 GiB is about 0.91 x 20.01 GiB (mpsd's estimate of this Mac's" in out
    assert "The estimate errs high, so the ratio in force was about 0.91 or more." in out
    assert (
        "mpsd's value now is 0.91. With an estimated maximum, mpsd cannot tell whether this "
        "job ran with it: it did if this Mac's real maximum is about 19.92 GiB."
    ) in out
    assert "That is mpsd's value" not in out
    assert "a cap of about 18.21 GiB (0.91 x 20.01 GiB, an estimated maximum)" in out


def test_a_cap_that_is_091_of_the_max_is_mpsds_value() -> None:
    recommended = round(20.01 * GIB)
    cap = pytorch_cap(0.91, recommended)
    assert format_size(cap, binary=False) == "18.21 GB"
    for source in ("metal", "estimate"):
        out = unwrapped(render(find_errors(message(cap)), known(0.91, recommended, source)))
        assert "18.21 GiB = 0.91 x 20.01 GiB (" in out
        assert "That is mpsd's value: the job ran with mpsd's variables." in out
        # Not "above the cap it failed at": it is that very cap.
        assert "That is the cap this job failed at: make the job use less memory" in out
        assert "above the 18.21 GiB cap" not in out


def test_1805_gb_is_a_ratio_of_0902_not_mpsds_091_nor_090() -> None:
    out = unwrapped(
        render(find_errors(message(round(18.05 * GIB))), known(0.91, round(20.01 * GIB)))
    )
    assert "18.05 GiB = 0.902 x 20.01 GiB" in out
    assert "0.90 x 20.01" not in out
    assert "That is mpsd's value" not in out
    assert "not mpsd's value (0.91)" in out


def test_a_two_decimal_ratio_other_than_mpsds_is_named_as_another() -> None:
    # 0.90 x 20.01 GiB = 18.009 GiB, printed 18.01 GB.
    out = unwrapped(
        render(find_errors(message(round(18.01 * GIB))), known(0.91, round(20.01 * GIB)))
    )
    assert "18.01 GiB = 0.90 x 20.01 GiB" in out
    assert "mpsd's value now is 0.91: this job ran with another" in out


def test_a_cap_above_mpsds_value_times_the_estimate_ran_with_a_higher_ratio() -> None:
    out = unwrapped(
        render(find_errors(message(round(18.13 * GIB))), known(0.5, round(20.01 * GIB), "estimate"))
    )
    assert "mpsd's value now is 0.5, a cap of at most 10.00 GiB (the estimate errs high)" in out
    assert "this job ran with a higher ratio" in out


def test_a_ratio_with_more_decimals_in_limits_toml_is_exported_and_shown_whole() -> None:
    out = unwrapped(
        render(find_errors(message(round(18.13 * GIB))), known(0.905, round(20.01 * GIB)))
    )
    assert "PYTORCH_MPS_HIGH_WATERMARK_RATIO=0.905 PYTORCH_MPS_LOW_WATERMARK_RATIO=0.905" in out
    assert "a cap of 18.11 GiB (0.905 x 20.01 GiB)" in out


def test_a_guess_is_printed_only_when_its_product_gives_the_cap() -> None:
    # 36.27 GiB: 1.7 x a 32 GB Mac's 21.33 GiB is 36.27; 0.7 x 51.84 GiB is 36.29 and
    # 1.45 x 24.96 GiB is 36.19, which the old 0.4% tolerance let through.
    out = unwrapped(render(find_errors(message(round(36.27 * GIB))), None))
    assert "36.27 GiB = 1.7 x 21.33 GiB: the default ratio on a 32 GB Mac" in out
    assert "0.7 x 51.84" not in out and "1.45 x" not in out


JOB_RATIOS = st.one_of(
    st.integers(30, 200).map(lambda n: n / 100),  # a ratio set by hand, or mpsd's
    st.floats(0.3, 2.0),  # a memory fraction set in the program
)
MAXES = st.one_of(
    st.sampled_from([ws for _, ws in macs.WORKING_SETS]),
    st.integers(4 * GIB, 200 * GIB),
)


@settings(deadline=None, max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(
    job=JOB_RATIOS,
    mpsd_hundredths=st.integers(30, 150),
    recommended=MAXES,
    source=st.sampled_from(["metal", "torch", "estimate", None]),
    real_share=st.floats(0.78, 1.0),
    same=st.booleans(),
    binary=st.booleans(),
)
@example(0.91, 91, round(20.01 * GIB), "metal", 1.0, False, False)
@example(0.906, 91, round(20.01 * GIB), "metal", 1.0, False, False)
@example(0.91, 91, round(20.01 * GIB), "estimate", 0.9956, False, False)
@example(0.90, 91, round(20.01 * GIB), "metal", 1.0, False, False)
def test_every_equation_explain_prints_holds_and_mpsds_value_is_named_only_when_it_is(
    job: float,
    mpsd_hundredths: int,
    recommended: int,
    source: str | None,
    real_share: float,
    same: bool,
    binary: bool,
) -> None:
    high = mpsd_hundredths / 100
    if same:
        job = high  # the job ran with mpsd's variables
    # With an estimate the Mac's real maximum is lower (the estimate errs high).
    real = round(recommended * real_share) if source == "estimate" else recommended
    cap = pytorch_cap(job, real)
    text = message(cap, binary)
    limits = known(high, recommended, source) if source else None
    out = unwrapped(render(find_errors(text), limits))
    for a, ratio, b in equations(out):
        assert _holds(a, ratio, b), f"{a} = {ratio} x {b} is false:\n{out}"
    if limits is None:
        return
    printed = format_size(cap)  # as explain shows it (GiB, MiB)
    cap_lo, cap_hi = _interval(*printed.split())
    mpsds = pytorch_cap(high, recommended)
    if "That is mpsd's value" in out:
        assert cap_lo <= mpsds <= cap_hi, out
    elif source != "estimate" or real == recommended:
        # The max the job ran with is the one mpsd knows: its own value is recognised.
        assert format_size(mpsds) != printed, out
    if source != "estimate":
        # The first ratio printed gives the cap from the exact max, not just its rounding.
        first = next(e for e in equations(out) if e[0] == tuple(printed.split()))
        assert cap_lo <= pytorch_cap(float(first[1]), recommended) <= cap_hi, out


SUM = re.compile(rf"((?:{SIZE} \+ )+{SIZE}) = {SIZE}")
OVER = re.compile(rf"= {SIZE}, over the {SIZE} cap by {SIZE}")


def _sum_holds(terms: list[tuple[str, str]], total: tuple[str, str]) -> bool:
    lo = sum(_interval(*t)[0] for t in terms)
    hi = sum(_interval(*t)[1] for t in terms)
    t_lo, t_hi = _interval(*total)
    return lo <= t_hi and t_lo <= hi


SIZES = st.integers(2 << 10, 64 * GIB)


@settings(deadline=None, max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(allocated=SIZES, other=SIZES, requested=SIZES, cap=SIZES)
def test_the_sums_of_why_it_failed_hold_at_the_printed_precision(
    allocated: int, other: int, requested: int, cap: int
) -> None:
    def size(n: int) -> str:
        return format_size(n, binary=False)

    text = (
        f"RuntimeError: MPS backend out of memory (MPS allocated: {size(allocated)}, other "
        f"allocations: {size(other)}, max allowed: {size(cap)}). Tried to allocate "
        f"{size(requested)} on private pool."
    )
    out = unwrapped(render(find_errors(text), None))
    sums = list(SUM.finditer(out))
    assert sums, out
    for m in sums:
        terms = re.findall(SIZE, m[1])
        assert len(terms) == 3
        assert _sum_holds(terms, (m[6], m[7])), m[0]  # groups 6, 7: the total
    for m in OVER.finditer(out):
        # need - cap = over, that is need = cap + over
        assert _sum_holds([(m[3], m[4]), (m[5], m[6])], (m[1], m[2])), m[0]
