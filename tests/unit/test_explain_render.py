"""Explanations that add up, in one unit system, with a ratio in force that is true at the
precision printed and a fix that fits the case (the cache in "MPS allocated", restarting)."""

from __future__ import annotations

import re

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from mpsd.limits import Limits
from mpsd.oom import find_errors, macs
from mpsd.oom.readers import to_bytes
from mpsd.oom.render import render, size
from tests.explain_support import GIB, by_id, limits_for


def explain(text: str, limits: Limits | None = None) -> str:
    out = render(find_errors(text), limits)
    return " ".join(out.split())  # wrapping aside


def mps(alloc: str, other: str, cap: str, request: str) -> str:
    return (
        f"RuntimeError: MPS backend out of memory (MPS allocated: {alloc}, other allocations: "
        f"{other}, max allowed: {cap}). Tried to allocate {request} on private pool."
    )


def test_numbers_that_do_not_add_up_get_the_note_they_promise() -> None:
    out = explain(mps("10.00 GB", "1.00 GB", "18.13 GB", "1.00 GB"))
    assert "the numbers do not add up (see the note below)" in out
    note = out.split("see the note below")[1]
    assert "Note: PyTorch does not check the printed numbers against the cap" in note
    assert "aligned size" in note and "driver's whole allocation" in note
    assert "can fall short of the cap" in note


def test_no_note_is_promised_when_the_numbers_add_up() -> None:
    out = explain(by_id("chatglm6b-311-title")["text"])
    assert "over the 18.13 GiB cap" in out
    assert "see the note below" not in out and "does not check the printed" not in out


def test_one_unit_system_gib_with_pytorchs_gb_said_once() -> None:
    text = "\n".join(
        [
            mps("18.02 GB", "107.10 MB", "18.13 GB", "4.50 MB"),
            mps("5.05 GB", "2.29 GB", "6.77 GB", "1.00 GB"),
            by_id("cads-4")["text"],
        ]
    )
    out = render(find_errors(text))
    sizes = re.findall(r"\d[\d.]* ([KMGT]i?B)\b(?! Mac)", out)
    assert sizes and all(unit.endswith("iB") for unit in sizes), set(sizes)
    assert out.count('"GB" and "MB" are GiB and MiB') == 1
    assert "a 16 GB Mac" in out  # a Mac's size stays in GB, as Apple sells it
    gib_only = render(find_errors(by_id("comfy-15029")["text"]))
    assert "are GiB and MiB" not in gib_only  # nothing to say when the message spelt GiB


def test_a_request_larger_than_the_whole_cap_is_a_shape_problem_first() -> None:
    out = explain(mps("2.00 GiB", "1.00 MiB", "18.13 GiB", "24.00 GiB"))
    why = out.split("Why it failed")[1].split("The ratio in force")[0]
    assert "The request alone, 24.00 GiB, is more than the whole 18.13 GiB cap" in why
    fix = out.split("Fix", 1)[1]
    assert fix.startswith(" First make the step smaller: one allocation of 24.00 GiB")
    assert "enough" not in fix and "this job needed" not in fix


def test_a_cap_is_never_called_enough_for_a_job_that_failed_at_a_lower_one() -> None:
    # mpsd's cap (0.9 x 21.33 = 19.2 GiB) is above the sum printed (12 GiB), but the job
    # failed at 18.13 GiB: it needed more than that, how much more nobody knows.
    limits = limits_for(0.9, round(21.33 * GIB), 25 * GIB)
    out = explain(mps("10.00 GB", "1.00 GB", "18.13 GB", "1.00 GB"), limits)
    assert "enough for" not in out and "had reached" not in out
    assert "above the 18.13 GiB cap this job failed at" in out
    low = limits_for(0.4, round(21.33 * GIB), 25 * GIB)
    out = explain(mps("10.00 GB", "1.00 GB", "18.13 GB", "1.00 GB"), low)
    assert "That cap is less than the 18.13 GiB this job needed" in out


def test_the_08_advice_names_its_source() -> None:
    out = explain("RuntimeError: invalid low watermark ratio 1.4")
    assert "PYTORCH_MPS_HIGH_WATERMARK_RATIO=0.80 PYTORCH_MPS_LOW_WATERMARK_RATIO=0.80" in out
    assert (
        'the article "MPS backend out of memory on a Mac: what the numbers mean and how to set '
        'the watermark", 0.8 gave a clean error and no swap on a 48 GB Mac'
    ) in out


def test_mps_allocated_is_explained_as_the_allocators_heaps_cache_included() -> None:
    out = explain(by_id("audioldm2-20")["text"])
    assert "MPS allocated 18.02 GiB PyTorch's MPS allocator: Metal heaps, cache included" in out
    assert "for your tensors" not in out


def test_after_an_invalid_ratio_the_fix_says_to_restart_the_process() -> None:
    assert "LOW's default" in explain("invalid low watermark ratio 1.4")
    assert "HIGH must be between 0 and 2" in explain("invalid high watermark ratio 2.5")
    for text in ("invalid low watermark ratio 1.4", "invalid high watermark ratio 2.5"):
        fix = explain(f"RuntimeError: {text}").split("Fix", 1)[1]
        assert "restart the Python process" in fix
        assert "changing os.environ in the process that failed does nothing" in fix


def test_without_max_allowed_the_cap_was_off_and_a_cut_paste_does_not_say_so() -> None:
    no_cap = "MPS backend out of memory (MPS allocated: 1.00 GiB, other allocations: 0 bytes)."
    off = explain(no_cap + " Tried to allocate 2.00 MiB on shared pool.")
    assert "the cap was off" in off and "push the Mac into swap" in off and "0.0: no cap" in off
    cut = explain("RuntimeError: MPS backend out of memory (MPS allocated: 18.02 GB, other allocat")
    assert 'The paste ends before "max allowed"' in cut and "cap was off" not in cut


def test_impossible_numbers_are_called_out() -> None:
    assert "above the cap" in explain(by_id("truememory-459")["text"])
    assert "holds almost nothing" in explain(by_id("ghfile-flower-ray-c")["text"])
    bogus = mps("1.00 GB", "17179869184.00 GB", "18.13 GB", "2.00 MB")
    assert "more memory than any Mac" in explain(bogus)
    assert "more than the GPU has" in explain(by_id("labelmakr-10")["text"])


def test_cuda_has_a_why_request_against_free_and_cached() -> None:
    # cads-4: 22.78 GiB asked, 12.73 GiB free, 9.35 GiB reserved but unallocated.
    out = explain(by_id("cads-4")["text"])
    why = out.split("Why it failed")[1].split("Fix")[0]
    assert "PyTorch asked for 22.78 GiB; only 12.73 GiB was free on the GPU" in why
    assert "9.35 GiB reserved but unallocated" in why
    assert "free and cached together, 22.08 GiB, are less than the request" in why
    fragmented = (
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 8.00 GiB. GPU 0 has a "
        "total capacity of 23.65 GiB of which 2.00 GiB is free. Of the allocated memory 12.00 "
        "GiB is allocated by PyTorch, and 9.00 GiB is reserved by PyTorch but unallocated. If "
        "reserved but unallocated memory is large try setting "
        "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation."
    )
    out = explain(fragmented)
    assert "enough for the request, but not in one piece. That is fragmentation." in out
    assert "Here it may be the whole fix" in out


def test_cuda_fix_names_the_allocator_setting_the_message_names() -> None:
    new = explain(by_id("cads-4")["text"]).split("Fix", 1)[1]
    assert "The message suggests export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True" in new
    assert "Here it cannot make room enough" in new
    old = explain(by_id("a1111-9415")["text"]).split("Fix", 1)[1]
    assert "The message suggests max_split_size_mb" in old
    assert "PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:128" in old


def test_a_size_is_never_wrapped_apart_from_its_unit() -> None:
    for ident in ("cads-4", "audioldm2-20", "comfy-15029", "a1111-9133"):
        out = render(find_errors(by_id(ident)["text"]))
        for line in out.splitlines():
            assert not re.match(r"\s*(?:[KMGT]i?B|bytes)\b", line), line


# --- the ratio in force: every "A = r x B" holds at the precision printed, and "mpsd's value"
# is said exactly when mpsd's ratio gives the message's cap. PyTorch's cap is ratio x
# recommended max, cut to bytes (MPSAllocator.mm), printed with two decimals.
SIZE = r"(\d+\.\d+) ([KMGT]iB)"
EQUATION = re.compile(rf"{SIZE} = (\d+(?:\.\d+)?) x {SIZE}")
OR_LINE = re.compile(rf"^\s+or (\d+(?:\.\d+)?) x {SIZE}")
CAP_OF = re.compile(rf"a cap of (?:about )?{SIZE} \((\d+(?:\.\d+)?) x {SIZE}")


def _interval(number: str, unit: str) -> tuple[float, float]:
    """The true values a printed size stands for (its last digit's rounding, plus a byte)."""
    parsed = to_bytes(number, unit.lower())
    assert parsed is not None
    return parsed[0] - parsed[1] - 1, parsed[0] + parsed[1] + 1


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
        found += [((m[1], m[2]), m[3], (m[4], m[5])) for m in CAP_OF.finditer(line)]
    return found


def cap_message(cap: int) -> str:
    return mps("1.00 GB", "1.00 MB", size(cap).replace("iB", "B"), "2.00 MB")


def ratio_text(cap: float, high: float, recommended: float, source: str = "metal") -> str:
    limits = limits_for(high, round(recommended * GIB), 400 * GIB, source)
    return re.sub(r"\n +(?=[^ ])", " ", render(find_errors(cap_message(round(cap * GIB))), limits))


def test_the_readme_sample_against_091_of_2001_gib_is_not_mpsds_value() -> None:
    out = ratio_text(18.13, 0.91, 20.01)  # 0.91 x 20.01 = 18.21; 18.13 is 0.906 x 20.01
    assert "18.13 GiB = 0.906 x 20.01 GiB (this Mac's recommended maximum" in out
    assert (
        "No ratio of two decimals gives this cap on this Mac, so it is not mpsd's value (0.91)"
        in out
    )
    assert "That is mpsd's value" not in out and "18.13 GiB = 0.91 x" not in out
    assert "a cap of 18.21 GiB (0.91 x 20.01 GiB)" in out
    estimated = ratio_text(18.13, 0.91, 20.01, "estimate")
    assert "18.13 GiB is about 0.91 x 20.01 GiB (mpsd's estimate of this Mac's" in estimated
    assert "The estimate errs high, so the ratio in force was about 0.91 or more." in estimated
    assert (
        "mpsd cannot tell whether this job ran with it: it did if this Mac's real maximum is "
        "about 19.92 GiB." in estimated
    )
    assert "a cap of about 18.21 GiB (0.91 x 20.01 GiB, an estimated maximum)" in estimated


def test_a_cap_that_is_mpsds_ratio_of_the_max_is_mpsds_value() -> None:
    cap = macs.cap_of(0.91, round(20.01 * GIB)) / GIB
    for source in ("metal", "estimate"):
        out = ratio_text(cap, 0.91, 20.01, source)
        assert "18.21 GiB = 0.91 x 20.01 GiB (" in out
        assert "That is mpsd's value: the job ran with mpsd's variables." in out
        assert "That is the cap this job failed at: make the job use less memory" in out


def test_other_ratios_are_named_with_the_decimals_that_give_the_cap() -> None:
    assert "18.05 GiB = 0.902 x 20.01 GiB" in ratio_text(18.05, 0.91, 20.01)
    other = ratio_text(18.01, 0.91, 20.01)  # 0.90 x 20.01 GiB = 18.009 GiB
    assert "18.01 GiB = 0.90 x 20.01 GiB" in other
    assert "mpsd's value now is 0.91: this job ran with another" in other
    higher = ratio_text(18.13, 0.5, 20.01, "estimate")
    assert "mpsd's value now is 0.50, a cap of at most 10.00 GiB (the estimate errs high)" in higher
    whole = ratio_text(18.13, 0.905, 20.01)
    assert "PYTORCH_MPS_HIGH_WATERMARK_RATIO=0.905 PYTORCH_MPS_LOW_WATERMARK_RATIO=0.905" in whole
    assert "a cap of 18.11 GiB (0.905 x 20.01 GiB)" in whole


def test_a_guess_is_printed_only_when_its_product_gives_the_cap() -> None:
    # 1.7 x a 32 GB Mac's 21.33 GiB is 36.27; 0.7 x 51.84 GiB is 36.29, 1.45 x 24.96 is 36.19.
    out = explain(cap_message(round(36.27 * GIB)))
    assert "36.27 GiB = 1.70 x 21.33 GiB: the default ratio on a 32 GB Mac" in out
    assert "0.7 x 51.84" not in out and "1.45 x" not in out


@settings(deadline=None, max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(
    job=st.one_of(st.integers(30, 200).map(lambda n: n / 100), st.floats(0.3, 2.0)),
    hundredths=st.integers(30, 150),
    recommended=st.one_of(
        st.sampled_from([ws for _, ws in macs.WORKING_SETS]), st.integers(4 * GIB, 200 * GIB)
    ),
    source=st.sampled_from(["metal", "estimate", None]),
    real_share=st.floats(0.78, 1.0),
    same=st.booleans(),
)
@example(0.906, 91, round(20.01 * GIB), "metal", 1.0, False)
@example(0.91, 91, round(20.01 * GIB), "estimate", 0.9956, False)
def test_every_equation_explain_prints_holds_and_mpsds_value_is_named_only_when_it_is(
    job: float, hundredths: int, recommended: int, source: str | None, real_share: float, same: bool
) -> None:
    high = hundredths / 100
    job = high if same else job
    # With an estimate the Mac's real maximum is lower (the estimate errs high).
    real = round(recommended * real_share) if source == "estimate" else recommended
    cap = macs.cap_of(job, real)
    limits = limits_for(high, recommended, 400 * GIB, source) if source else None
    out = re.sub(r"\n +(?=[^ ])", " ", render(find_errors(cap_message(cap)), limits))
    for a, ratio, b in equations(out):
        (a_lo, a_hi), (b_lo, b_hi) = _interval(*a), _interval(*b)
        assert float(ratio) * b_lo <= a_hi and a_lo <= float(ratio) * b_hi, out
    if limits is None:
        return
    cap_lo, cap_hi = _interval(*size(cap).split())
    mpsds = macs.cap_of(high, recommended)
    if "That is mpsd's value" in out:
        assert cap_lo <= mpsds <= cap_hi, out
    elif source != "estimate" or real == recommended:
        assert size(mpsds) != size(cap), out


def test_an_mps_error_pasted_from_r_or_windows_is_explained_with_that_shells_fix() -> None:
    for lead, command in (
        ("Error in (function (x) {\n", "Sys.setenv("),
        ("PS C:\\Users\\me\\> ", "$env:"),
    ):
        out = explain(lead + mps("10.00 GB", "1.00 GB", "18.13 GB", "1.00 GB"))
        assert "Why it failed" in out and command in out and "export" not in out
