"""``mpsd explain`` as a user runs it: files, stdin, exit codes, --json, colour, limits.toml,
and (``slow``) inputs of 100 MB and of a million errors."""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from mpsd import limits
from mpsd.oom.finding import KEYS
from tests.conftest import ROOT, run_mpsd
from tests.explain_support import by_id, has_match
from tests.fixture_files import oom_frameworks

EXAMPLE = ROOT / "examples" / "oom.txt"
ANSI = re.compile(r"\x1b\[")
GIB = 1 << 30


def test_the_readme_example_is_explained_with_numbers_ratio_and_fix() -> None:
    done = run_mpsd("explain", str(EXAMPLE))
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "MPS out of memory" in out
    for number in ("18.02 GiB", "107.10 MiB", "4.50 MiB", "18.13 GiB"):
        assert number in out
    assert "1.70 x 10.67 GiB: the default ratio on a 16 GB Mac" in out
    assert "PYTORCH_MPS_HIGH_WATERMARK_RATIO=0.80 PYTORCH_MPS_LOW_WATERMARK_RATIO=0.80" in out
    assert "mpsd enable" in out
    assert done.stderr == ""
    assert not ANSI.search(out)  # not a terminal


def test_stdin_and_file_give_the_same_explanation(tmp_path: Path) -> None:
    text = by_id("comfy-8984")["text"]
    path = tmp_path / "log.txt"
    path.write_text(text, encoding="utf-8")
    from_file = run_mpsd("explain", str(path))
    from_stdin = run_mpsd("explain", input=text)
    from_dash = run_mpsd("explain", "-", input=text)
    assert from_file.returncode == from_stdin.returncode == from_dash.returncode == 0
    assert from_file.stdout == from_stdin.stdout == from_dash.stdout
    assert "5.81 GiB" in from_file.stdout


def test_json_has_the_spec_shape_for_every_kind() -> None:
    ids = ["audioldm2-20", "a1111-9415", "vrt-49", "sdscripts-603", "hunyuani2v-66"]
    text = "\n\n".join(by_id(i)["text"] for i in ids)
    done = run_mpsd("explain", "--json", input=text)
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert list(data) == ["findings"]
    kinds = [f["kind"] for f in data["findings"]]
    assert kinds == ["mps_oom", "cuda_oom", "cpu_oom", "mps_invalid_low_watermark", "mps_other"]
    for finding, ident in zip(data["findings"], ids):
        assert has_match([finding], by_id(ident)["expected"])
        for key in KEYS[finding["kind"]]:
            assert key in finding
    mps = data["findings"][0]
    assert type(mps["allocated_bytes"]) is int and mps["pool"] == "private"
    assert type(data["findings"][1]["device"]) is int
    assert data["findings"][3]["ratio"] == 1.4


def test_a_missing_number_is_null_in_json() -> None:
    done = run_mpsd("explain", "--json", input=by_id("ghfile-voxcpm-abbrev")["text"])
    finding = json.loads(done.stdout)["findings"][0]
    assert finding["other_bytes"] is None
    assert finding["pool"] is None


@pytest.mark.parametrize("text", ["", "   \n", "all good, loss=0.12\n"])
def test_nothing_recognised_exits_1_with_one_sentence(text: str) -> None:
    done = run_mpsd("explain", input=text)
    assert done.returncode == 1
    assert done.stdout == ""
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("mpsd: ")
    as_json = run_mpsd("explain", "--json", input=text)
    assert as_json.returncode == 1
    assert json.loads(as_json.stdout) == {"findings": [], "seen": []}
    assert "paste the whole" not in done.stderr  # nothing looks cut


def test_an_error_seen_but_not_read_is_named_not_asked_for_again() -> None:
    numba = oom_frameworks()["numba-wsl-cuinit-oom-title"]["text"]
    done = run_mpsd("explain", input=numba)
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == (
        "mpsd: saw a numba CUDA out-of-memory error in the input: mpsd does not read its numbers.\n"
    )
    as_json = run_mpsd("explain", "--json", input=numba)
    assert json.loads(as_json.stdout) == {
        "findings": [],
        "seen": ["a numba CUDA out-of-memory error"],
    }


def test_paste_the_whole_error_only_when_the_paste_looks_cut() -> None:
    cut = 'Traceback (most recent call last):\n  File "train.py", line 3, in <module>\n'
    done = run_mpsd("explain", input=cut)
    assert done.returncode == 1 and "paste the whole error message" in done.stderr
    whole = cut + "ValueError: bad shape\n"
    assert "paste the whole" not in run_mpsd("explain", input=whole).stderr


def test_from_a_terminal_one_ctrl_d_ends_the_paste_and_the_prompt_points_to_paste() -> None:
    pexpect = pytest.importorskip("pexpect")
    child = pexpect.spawn(
        sys.executable, ["-m", "mpsd", "explain"], cwd=str(ROOT), encoding="utf-8", timeout=60
    )
    child.expect("Ctrl-D")
    child.expect("--paste")
    for line in oom_frameworks()["os-linux-memcg-oom-uwsgi"]["text"].splitlines()[:2]:
        child.sendline(line)
    child.sendeof()  # once
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
    assert "uwsgi [63214]" in child.before and "cgroup" in child.before


def test_usage_errors_exit_2_with_one_sentence(tmp_path: Path) -> None:
    cases = [
        ("explain", str(tmp_path / "missing.txt")),
        ("explain", str(tmp_path)),
        ("explain", "--paste", str(EXAMPLE)),
        ("explain", "--bogus"),
        ("explain", "a", "b"),
    ]
    for args in cases:
        done = run_mpsd(*args)
        assert done.returncode == 2, (args, done.stderr)
        assert "Traceback" not in done.stderr
        assert done.stdout == ""


def test_an_unreadable_file_is_a_usage_error(tmp_path: Path) -> None:
    path = tmp_path / "secret.txt"
    path.write_text("x")
    path.chmod(0)
    if os.access(path, os.R_OK):
        pytest.skip("running as root: every file is readable")
    done = run_mpsd("explain", str(path))
    assert done.returncode == 2
    assert "permission" in done.stderr.lower()


def test_paste_without_pbpaste_says_so_and_exits_2(tmp_path: Path) -> None:
    done = run_mpsd("explain", "--paste", env={"PATH": str(tmp_path)})
    assert done.returncode == 2
    assert "pbpaste" in done.stderr and "Traceback" not in done.stderr
    assert done.stderr.count("\n") == 1


def test_paste_reads_the_clipboard_through_pbpaste(tmp_path: Path) -> None:
    fake = tmp_path / "pbpaste"
    fake.write_text(f"#!/bin/sh\ncat '{EXAMPLE}'\n")
    fake.chmod(0o755)
    path = f"{tmp_path}{os.pathsep}{os.environ.get('PATH', '')}"
    done = run_mpsd("explain", "--paste", "--json", env={"PATH": path})
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["findings"][0]["kind"] == "mps_oom"


def test_binary_junk_is_no_error_and_no_traceback(tmp_path: Path) -> None:
    path = tmp_path / "junk.bin"
    path.write_bytes(bytes(range(256)) * 400 + b"\xff\xfe\x00\x00" * 1000)
    done = run_mpsd("explain", str(path))
    assert done.returncode == 1
    assert "Traceback" not in done.stderr


def test_a_large_log_finds_every_error_at_start_middle_and_end(tmp_path: Path) -> None:
    line = "2026-11-30 05:00:00,123 INFO trainer: step 1234 loss=0.1234 it/s=3.2 eta 00:12:00\n"
    filler = line * 40_000  # ~3.4 MB
    errors = [by_id(i)["text"] for i in ("audioldm2-20", "cads-4", "vrt-49")]
    path = tmp_path / "big.log"
    path.write_text(errors[0] + "\n" + filler + errors[1] + "\n" + filler + errors[2])
    done = run_mpsd("explain", "--json", str(path))
    kinds = [f["kind"] for f in json.loads(done.stdout)["findings"]]
    assert kinds == ["mps_oom", "cuda_oom", "cpu_oom"]


def test_colour_only_on_a_terminal_and_never_with_no_color() -> None:
    pexpect = pytest.importorskip("pexpect")
    env = {**os.environ, "TERM": "xterm-256color"}
    env.pop("NO_COLOR", None)
    cmd = f"{sys.executable} -m mpsd explain {EXAMPLE}"
    coloured = pexpect.run(cmd, env=env, timeout=60, encoding="utf-8")
    assert ANSI.search(coloured)
    env["NO_COLOR"] = "1"
    plain = pexpect.run(cmd, env=env, timeout=60, encoding="utf-8")
    assert not ANSI.search(plain)
    assert "18.13 GiB" in plain
    # colour changes nothing else: same words, same wrapping, same aligned table
    assert re.sub(r"\x1b\[[\d;]*m", "", coloured) == plain


def _write_limits(high: float, recommended: int, baseline: int, source: str = "torch") -> None:
    limits.write(
        limits.Limits(
            high_watermark_ratio=high,
            low_watermark_ratio=high,
            limit_bytes=int(high * recommended),
            recommended_max_bytes=recommended,
            recommended_max_source=source,
            baseline_free_bytes=baseline,
            headroom=0.8,
            updated_at=dt.datetime(2026, 11, 30, 5, 0, tzinfo=dt.timezone.utc),
        )
    )


def test_with_limits_toml_the_ratio_is_read_against_this_macs_maximum() -> None:
    # A 16 GB Mac's recommended max, 2/3 of its RAM (10.6667 GiB): 1.7 x that is 18.13 GiB.
    _write_limits(0.62, recommended=16 * GIB * 2 // 3, baseline=9 * GIB)
    done = run_mpsd("explain", str(EXAMPLE))
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "18.13 GiB = 1.70 x 10.67 GiB (this Mac's recommended maximum" in out
    assert "PyTorch's default ratio" in out
    assert "PYTORCH_MPS_HIGH_WATERMARK_RATIO=0.62 PYTORCH_MPS_LOW_WATERMARK_RATIO=0.62" in out
    assert "16 GB Mac" not in out  # no guessing when mpsd knows


def test_an_estimated_recommended_max_is_called_an_estimate_not_this_macs() -> None:
    _write_limits(1.17, recommended=round(15.69 * GIB), baseline=23 * GIB, source="estimate")
    out = run_mpsd("explain", str(EXAMPLE)).stdout
    assert "mpsd's estimate of this Mac's recommended maximum" in " ".join(out.split())
    assert "(this Mac's recommended maximum, from limits.toml)" not in out


def test_with_limits_toml_a_job_that_ran_with_mpsds_value_is_recognised() -> None:
    _write_limits(0.5, recommended=round(37.44 * GIB), baseline=30 * GIB)
    article = (
        "RuntimeError: MPS backend out of memory (MPS allocated: 18.50 GiB, other allocations: "
        "448.00 KiB, max allowed: 18.72 GiB). Tried to allocate 512.00 MiB on private pool."
    )
    out = run_mpsd("explain", input=article).stdout
    assert "18.72 GiB = 0.50 x 37.44 GiB" in out
    assert "mpsd's value" in out


def test_a_broken_limits_toml_falls_back_to_guessing() -> None:
    from mpsd import paths

    paths.limits_file().parent.mkdir(parents=True, exist_ok=True)
    paths.limits_file().write_text("high_watermark_ratio = [\n")
    done = run_mpsd("explain", str(EXAMPLE))
    assert done.returncode == 0
    assert "the default ratio on a 16 GB Mac" in done.stdout


def test_a_pipe_given_as_file_is_read_like_cat_reads_it(tmp_path: Path) -> None:
    """`mpsd explain <(pbpaste)`: process substitution hands explain a pipe's path."""
    done = subprocess.run(
        ["bash", "-c", f'{sys.executable} -m mpsd explain --json <(cat "$1")', "_", EXAMPLE],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["findings"][0]["kind"] == "mps_oom"


def test_a_socket_given_as_file_is_one_sentence_and_exit_2(tmp_path: Path) -> None:
    path = tmp_path / "sock"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    try:
        done = run_mpsd("explain", str(path), timeout=20)
    finally:
        server.close()
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and f"cannot read {path}" in done.stderr
    assert done.stdout == ""


def test_a_directory_given_as_file_is_one_sentence_and_exit_2(tmp_path: Path) -> None:
    done = run_mpsd("explain", str(tmp_path), timeout=20)
    assert done.returncode == 2
    assert (
        done.stderr
        == f"mpsd: {tmp_path} is a directory; give the file that holds the error message.\n"
    )


def _write_worst(path: Path, case: str, size: int) -> None:
    """``size`` bytes of one of issue 12's worst cases, written a MB at a time."""
    import random

    mps = by_id("audioldm2-20")["text"]
    log_line = "2026-11-30 05:00:00,123 INFO trainer: step 1234 loss=0.1234 memory 3.2 GB\n"
    rng = random.Random(12)
    with path.open("wb") as out:
        while out.tell() < size:
            if case == "random bytes":
                out.write(rng.randbytes(1 << 20))
            elif case == "backslashes":
                out.write(b"\\" * 200_000 + b"\n" + mps.encode() + b"\n")
            elif case == "one huge line":
                out.write((log_line.replace("\n", " ") * 12_000 + mps.replace("\n", " ")).encode())
            else:  # a normal log, an error in every MB
                out.write((log_line * 12_000 + mps + "\n").encode())


# The child's own peak RSS: measured by a small parent (a child's peak RSS starts
# at its parent's size on Linux, and pytest is not small).
_MEASURE = """
import resource, subprocess, sys
done = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=300)
peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
print(done.returncode, peak * (1 if sys.platform == "darwin" else 1024))
"""


@pytest.mark.slow
@pytest.mark.parametrize("case", ["random bytes", "backslashes", "one huge line", "normal log"])
def test_a_100_mb_worst_case_is_read_in_little_memory(tmp_path: Path, case: str) -> None:
    import subprocess

    path = tmp_path / "input"
    _write_worst(path, case, 100 * 1_000_000)
    cmd = [sys.executable, "-c", _MEASURE, sys.executable, "-m", "mpsd", "explain", str(path)]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=400, check=True).stdout
    code, peak = out.split()
    assert int(code) == (1 if case == "random bytes" else 0)
    # Memory stays flat (~30 MB here); the time is bench/explain_bench.py's to measure.
    assert int(peak) < 300 * 1_000_000, (case, peak)


def test_output_to_a_closed_pipe_ends_quietly() -> None:
    import subprocess

    text = "\n".join([by_id("audioldm2-20")["text"], by_id("cads-4")["text"]] * 200)
    for args in (["explain"], ["explain", "--json"]):
        child = subprocess.Popen(
            [sys.executable, "-m", "mpsd", *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        assert child.stdout is not None and child.stderr is not None
        child.stdout.close()  # `mpsd explain | head -0`: the reader is gone before any write
        _, err = child.communicate(text.encode(), timeout=60)
        assert child.returncode == 0
        assert err == b""


@pytest.mark.slow
def test_a_million_errors_give_a_short_report_and_say_how_many_more(tmp_path: Path) -> None:
    line = "RuntimeError: MPS backend out of memory (MPS allocated: {} GB, max allowed: 9 GB).\n"
    path = tmp_path / "many.log"
    path.write_text("".join(line.format(i) for i in range(1_000_000)))
    done = run_mpsd("explain", str(path), timeout=300)
    assert done.returncode == 0
    assert done.stdout.count("MPS out of memory") == 20
    assert done.stdout.endswith("... and 999980 more errors (--json lists the first 1000).\n")
    as_json = run_mpsd("explain", "--json", str(path), timeout=300)
    assert len(json.loads(as_json.stdout)["findings"]) == 1000
    assert as_json.stderr == "mpsd: 999000 more errors after these 1000 were counted, not listed.\n"
