"""``mpsd probe`` end to end on Linux: the stand-in device plays MPS (real ``torch.rand``
tensors on the CPU build, PyTorch's own out-of-memory wording at the cap) and a stand-in swap
counter plays the OS. Caps are tens of MB."""

from __future__ import annotations

import datetime as dt
import importlib.util
import json
import os
import re
import signal
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import psutil
import pytest

from mpsd import limits as limits_mod
from tests.conftest import run_mpsd, wait_for

if importlib.util.find_spec("torch") is None:
    pytest.skip("needs torch (the CPU build will do)", allow_module_level=True)

MIB = 1 << 20
GIB = 1 << 30


def _limits(high: float, headroom: float = 0.8) -> None:
    limits_mod.write(
        limits_mod.Limits(
            high_watermark_ratio=high,
            low_watermark_ratio=high,
            limit_bytes=int(high * 40 * MIB),
            recommended_max_bytes=40 * MIB,
            recommended_max_source="torch",
            baseline_free_bytes=int(high * 40 * MIB / headroom),
            headroom=headroom,
            updated_at=dt.datetime(2026, 11, 30, 5, 0, tzinfo=dt.timezone.utc),
        )
    )


@pytest.fixture(autouse=True)
def in_the_venv(monkeypatch: pytest.MonkeyPatch) -> None:
    """The tests run as from a shell with this venv active: its python (with torch) is the
    one probe uses by default."""
    monkeypatch.setenv("VIRTUAL_ENV", sys.prefix)


@pytest.fixture
def fake(tmp_path: Path) -> dict[str, str]:
    """The stand-ins: a 40 MiB "recommended max" and a swap counter file at 0, pressure normal."""
    counter = tmp_path / "swapouts"
    counter.write_text("0 1\n")
    return {"MPSD_PROBE_FAKE_DEVICE": "40M", "MPSD_PROBE_FAKE_SWAP": str(counter)}


def _swapouts(env: dict[str, str]) -> int:
    return int(Path(env["MPSD_PROBE_FAKE_SWAP"]).read_text().split()[0])


def test_a_clean_run_reports_where_the_error_came_and_says_all_good(
    fake: dict[str, str],
) -> None:
    _limits(0.5)
    done = run_mpsd("probe", "--step", "2M", env=fake)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "ratio 0.50 (low 0.50)" in out
    # 0.5 x 40 MiB = 20 MiB; at 18 MiB + 448 KiB the next 2 MiB would not fit
    assert "Clean error at 18.44 MiB held, max allowed 20.00 MiB (0.50 x 40.00 MiB" in out
    assert "after 9 steps" in out
    assert "Swap-outs during the run: 0" in out
    assert "Verdict: clean." in out
    assert "All good" in out
    assert "probe: 18.00 MiB of 20.00 MiB max allowed" in done.stderr  # progress
    assert "Traceback" not in done.stderr


def test_swap_stops_the_child_within_a_step_and_the_verdict_says_swapped(
    fake: dict[str, str],
) -> None:
    _limits(1.0)
    env = {**fake, "MPSD_PROBE_FAKE_SWAP_AT": "10M", "MPSD_PROBE_FAKE_DELAY": "0.05"}
    done = run_mpsd("probe", "--step", "2M", "--json", env=env)
    assert done.returncode == 1, done.stderr
    data = json.loads(done.stdout)
    assert data["verdict"] == "swapped"
    assert data["error_at_bytes"] is None
    # The stand-in OS swaps out one step's pages (2 MiB / 16 KiB = 128) for every step
    # taken above 10 MiB: the child was stopped after the first such step.
    assert _swapouts(env) == 128
    assert data["swapouts"] == 128
    assert data["allocated_bytes"] == 12 * MIB < data["max_allowed_bytes"]
    # held: 12 MiB of steps + 448 KiB of other allocations (the driver's count):
    # 0.8 x (1.0 x 12.44/40 x 0.95 = 0.29)
    assert data["config_line"] == "headroom = 0.23"
    assert "put `headroom = 0.23` in config.toml" in data["advice"]
    assert "probe: 12.00 MiB of 40.00 MiB max allowed" in done.stderr


def test_steps_rounded_up_by_pytorch_count_as_held(fake: dict[str, str]) -> None:
    """Newest PyTorch rounds a large allocation up to 1/32 of its power of two (up to ~3%):
    2.1 MiB steps take 2.125 MiB each; the clean error counts what was held, and a stop's
    advice the driver's count, not the steps' sum."""
    done = run_mpsd("probe", "--ratio", "0.5", "--step", "2.1M", "--json", env=fake)
    data = json.loads(done.stdout)
    assert data["verdict"] == "clean" and data["steps"] == 9, done.stderr
    assert data["allocated_bytes"] == 9 * int(2.1 * MIB)  # the steps asked for
    # what PyTorch held, as its message prints it (two decimals)
    assert data["error_at_bytes"] == pytest.approx(9 * 2228224 + 448 * 1024, rel=1e-3)
    assert data["oom"]["requested_bytes"] == pytest.approx(2228224, rel=1e-2)  # 2.12 MiB


def test_pressure_already_at_warning_refuses_to_start(fake: dict[str, str]) -> None:
    Path(fake["MPSD_PROBE_FAKE_SWAP"]).write_text("0 2\n")
    done = run_mpsd("probe", "--ratio", "0.5", "--step", "2M", env=fake)
    assert done.returncode == 1
    assert done.stderr == (
        "mpsd: memory pressure is already warning: quit a memory-hungry app, then run "
        "`mpsd probe` again.\n"
    )


@pytest.mark.slow
def test_a_crashing_child_is_one_sentence_and_exit_2(fake: dict[str, str]) -> None:
    env = {**fake, "MPSD_PROBE_FAKE_CRASH_AT": "6M"}
    done = run_mpsd("probe", "--ratio", "0.5", "--step", "2M", env=env)
    assert done.returncode == 2
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("mpsd: the probe's child (")
    assert "killed by SIGSEGV after 2 steps (4.00 MiB allocated)" in last
    assert "Traceback" not in done.stderr
    assert done.stdout == ""


def test_without_torch_the_user_is_told_how_to_install_it(fake: dict[str, str]) -> None:
    python = "/usr/bin/python3"
    if subprocess.run([python, "-c", "import torch"], capture_output=True).returncode == 0:
        pytest.skip("the system python has torch")
    done = run_mpsd("probe", "--ratio", "0.5", "--python", python, env=fake)
    assert done.returncode == 2
    # A command name is looked up on PATH, like a shell would.
    by_name = run_mpsd(
        "probe", "--ratio", "0.5", "--python", "python3", env={**fake, "PATH": "/usr/bin"}
    )
    assert by_name.stderr == done.stderr
    assert done.returncode == 2
    assert done.stderr == (
        f"mpsd: torch is not installed for {python}: install it into your project's venv "
        f"(`{python} -m pip install torch`), or point mpsd at the venv's interpreter with "
        "`mpsd probe --python .venv/bin/python`.\n"
    )


@pytest.mark.slow
def test_without_mps_the_user_is_told_what_mps_needs() -> None:
    done = run_mpsd("probe", "--ratio", "0.5")
    assert done.returncode == 2
    assert "MPS needs an Apple Silicon Mac with macOS 12.3+" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--ratio", "0"], "--ratio '0' is not a ratio PyTorch accepts"),
        (["--ratio", "2.5"], "--ratio '2.5' is not a ratio PyTorch accepts"),
        (["--ratio", "nan"], "--ratio 'nan' is not a ratio PyTorch accepts"),
        (["--ratio", "1e-9"], "--ratio '1e-9' is not a ratio PyTorch accepts"),
        (["--ratio", "0.5", "--step", "big"], "--step: 'big' is not a size"),
        (["--ratio", "0.5", "--step", "4K"], "--step '4K' is too small"),
        (["--ratio", "0.5", "--python", "/nonexistent/python"], "is not a Python interpreter"),
        (["--ratio", "0.5", "--python", "no-such-python-here"], "is not a Python interpreter"),
        ([], "mpsd has no recommended ratio yet (limits.toml is missing)"),
        (["--calibrate", "--ratio", "0.9", "--yes"], "first."),  # --ratio: the start only
    ],
)
def test_bad_input_is_one_sentence_and_exit_2(args: list[str], message: str) -> None:
    done = run_mpsd("probe", *args)
    assert done.returncode == 2
    assert done.stderr.startswith("mpsd: ") and message in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def _slow_probe(fake: dict[str, str], err: Path) -> tuple[subprocess.Popen[bytes], psutil.Process]:
    """`mpsd probe` filling a 400 MiB stand-in slowly (1 MiB per 0.2 s), stderr to ``err``;
    returned once its one child is allocating."""
    env = {**os.environ, **fake, "MPSD_PROBE_FAKE_DEVICE": "400M", "MPSD_PROBE_FAKE_DELAY": "0.2"}
    with err.open("w") as handle:
        parent = subprocess.Popen(
            [sys.executable, "-m", "mpsd", "probe", "--ratio", "1", "--step", "1M"],
            stdout=subprocess.DEVNULL,
            stderr=handle,
            env=env,
        )
    try:
        wait_for(lambda: "MiB of" in err.read_text(), "the child to allocate")
        children = psutil.Process(parent.pid).children(recursive=True)
        assert len(children) == 1
    except BaseException:
        parent.kill()
        parent.wait()
        raise
    return parent, children[0]


@pytest.mark.parametrize(
    ("signum", "code"),
    [(signal.SIGINT, 130), pytest.param(signal.SIGTERM, 143, marks=pytest.mark.slow)],
)
def test_interrupting_the_probe_kills_the_child_and_leaves_nothing_running(
    fake: dict[str, str], tmp_path: Path, signum: int, code: int
) -> None:
    err = tmp_path / "stderr"
    parent, child = _slow_probe(fake, err)
    try:
        parent.send_signal(signum)
        parent.wait(timeout=30)
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()
    assert parent.returncode == code
    assert not psutil.pid_exists(child.pid) or child.status() == psutil.STATUS_ZOMBIE
    with pytest.raises(ProcessLookupError):
        os.killpg(child.pid, 0)  # nothing left in the child's process group
    text = err.read_text()
    assert "Traceback" not in text
    if signum == signal.SIGINT:
        assert "probe interrupted; its child was stopped and its memory freed" in text


@pytest.mark.slow
def test_a_child_whose_parent_was_killed_stops_by_itself(
    fake: dict[str, str], tmp_path: Path
) -> None:
    # kill -9 of mpsd leaves nobody to watch swap: the child must not go on filling memory.
    parent, child = _slow_probe(fake, tmp_path / "stderr")
    parent.kill()
    parent.wait()

    def gone() -> bool:
        try:
            return child.status() == psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return True

    wait_for(gone, "the child to go")


@pytest.mark.slow
def test_calibration_steps_down_then_writes_the_headroom_keeping_comments(
    fake: dict[str, str], isolated_dirs: dict[str, Path]
) -> None:
    _limits(1.0, headroom=0.8)
    config = isolated_dirs["config"] / "config.toml"
    config.write_text("# my mpsd settings\ninterval = 60  # once a minute\n")
    # The stand-in Mac swaps above 36 MiB: ratio 1.0 (cap 40 MiB) swaps, 0.95 (38 MiB) is
    # clean: 36 MiB + 448 KiB + 2 MiB would pass 38 MiB.
    env = {**fake, "MPSD_PROBE_FAKE_SWAP_AT": "36M"}
    done = run_mpsd("probe", "--calibrate", "--step", "2M", input="y\ny\n", env=env)
    assert done.returncode == 0, done.stderr
    assert "WARNING: calibration fills the GPU memory" in done.stderr
    assert "Start the calibration? [y/N]" in done.stderr
    # The swap counter is polled: on a loaded machine it is seen a step off (36 to 40 MiB).
    swapped = re.search(r"calibrate: ratio 1\.00: swapped at (\d+\.\d+) MiB", done.stderr)
    assert swapped and 36.0 <= float(swapped.group(1)) <= 40.0, done.stderr
    assert "calibrate: ratio 0.95: clean error at 36.44 MiB" in done.stderr
    assert "Ratio 0.95 gave a clean error; ratio 1.00 swapped." in done.stdout
    assert f"Write `headroom = 0.76` to {config}? [y/N]" in done.stderr
    assert f"Wrote `headroom = 0.76` to {config}" in done.stderr
    assert config.read_text() == (
        "# my mpsd settings\ninterval = 60  # once a minute\nheadroom = 0.76\n"
    )


def _stand_in_probe(tried: list[float]):  # type: ignore[no-untyped-def]
    """A probe run without a child: it swaps above ratio 0.95 and is clean at or below."""
    from mpsd.probe import verdict as pv

    def probe(high: float, low: float) -> pv.ProbeResult:
        tried.append(high)
        swapped = high > 0.95
        return pv.ProbeResult(
            high=high,
            low=low,
            step_bytes=MIB,
            outcome=pv.SWAPPED if swapped else pv.OOM,
            swapouts_before=0,
            swapouts_after=9 if swapped else 0,
        )

    return probe


def test_calibration_under_a_swap_penalty_writes_a_headroom_that_stays_clean_after_it(
    isolated_dirs: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    import argparse

    from mpsd.commands import probe as command
    from mpsd.config import load_config
    from mpsd.daemon.policy import recommend
    from mpsd.machine.sample import Sample

    # The daemon holds the ratio at 1.0 only because of a swap penalty (0.8): headroom 0.8 x
    # baseline 62.5 MiB is 1.25 x the 40 MiB recommended max. Once the penalty wears off, the
    # headroom written must still give no more than the ratio that was clean (0.95).
    baseline = int(62.5 * MIB)
    _limits(1.0, headroom=0.8)
    penalised = limits_mod.read()
    assert penalised is not None
    current = replace(penalised, baseline_free_bytes=baseline)
    args = argparse.Namespace(json=False, yes=True)
    assert command._calibrate(args, None, current, _stand_in_probe([])) == 0
    assert "Ratio 0.95 gave a clean error; ratio 1.00 swapped." in capsys.readouterr().out
    config = load_config(isolated_dirs["config"] / "config.toml")
    steady = [Sample(t=float(t), available_bytes=baseline, total_bytes=GIB) for t in range(99)]
    after = recommend(steady, config, 40 * MIB)
    assert after is not None and after.high_watermark_ratio <= 0.95


def test_calibration_asks_before_writing_and_no_writes_nothing(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    isolated_dirs: dict[str, Path],
) -> None:
    import argparse
    import io

    from mpsd.commands import probe as command

    _limits(1.0, headroom=0.8)
    tried: list[float] = []
    monkeypatch.setattr("sys.stdin", io.StringIO("y\nn\n"))
    args = argparse.Namespace(json=True, yes=False)
    code = command._calibrate(args, None, limits_mod.read(), _stand_in_probe(tried))
    assert code == 0
    assert tried == [1.0, 0.95]
    captured = capsys.readouterr()
    data = json.loads(captured.out)
    assert [run["verdict"] for run in data["runs"]] == ["swapped", "clean"]
    assert (data["clean_ratio"], data["headroom"], data["written"]) == (0.95, 0.76, False)
    assert "Write `headroom = 0.76` to" in captured.err
    assert "Nothing was written." in captured.err
    assert not (isolated_dirs["config"] / "config.toml").exists()


def test_calibration_can_be_cancelled_before_anything_runs(fake: dict[str, str]) -> None:
    _limits(1.0)
    done = run_mpsd("probe", "--calibrate", input="n\n", env=fake)
    assert done.returncode == 1
    assert "Calibration cancelled; nothing was changed." in done.stderr
    assert "calibrate: ratio" not in done.stderr


def test_docs_probe_md_documents_every_probe_option_and_the_budget_example() -> None:
    import argparse

    from mpsd.commands import probe as command
    from tests.conftest import ROOT

    section = (ROOT / "docs" / "probe.md").read_text()
    parser = argparse.ArgumentParser()
    command.configure(parser)
    options = [o for action in parser._actions for o in action.option_strings if o != "-h"]
    missing = [o for o in options if o not in section and o != "--help"]
    assert missing == []
    assert "mpsd.budget()" in section and "headroom = 0.7" in section


def test_yes_without_calibrate_is_refused() -> None:
    done = run_mpsd("probe", "--yes")
    assert done.returncode == 2
    assert done.stderr == "mpsd: --yes goes with --calibrate (a plain probe asks nothing).\n"
