"""bench/replay.py: the real policy over a trace, JSON lines out, a summary on stderr."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
GIB = 1 << 30


def replay(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(ROOT / "bench" / "replay.py"), *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_replay_prints_one_json_object_per_evaluation_and_a_job_summary(tmp_path: Path) -> None:
    trace = tmp_path / "trace.csv"
    rows = ["t,available_bytes,ml_bytes,swapouts,pressure"]
    for i in range(2 * 288):  # two days, every 5 minutes
        t = i * 300
        ml = 10 * GIB if 300 <= i < 320 else 0
        rows.append(f"{t},{30 * GIB - ml},{ml},0,1")
    trace.write_text("\n".join(rows) + "\n")
    result = replay(
        str(trace), "--total-bytes", str(48 * GIB), "--recommended-max-bytes", str(36 * GIB)
    )
    assert result.returncode == 0, result.stderr
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert lines
    for line in lines:
        assert set(line) == {
            "t",
            "high_watermark_ratio",
            "low_watermark_ratio",
            "limit_bytes",
            "baseline_free_bytes",
        }
        assert 0 < line["low_watermark_ratio"] <= line["high_watermark_ratio"] <= 2
    assert lines[-1]["high_watermark_ratio"] == 0.66  # 0.8 x 30 / 36
    assert "jobs: 1; limit above really free: 0" in result.stderr


def test_replay_of_a_missing_trace_is_one_sentence_and_exit_2(tmp_path: Path) -> None:
    result = replay(
        str(tmp_path / "none.csv"), "--total-bytes", "1", "--recommended-max-bytes", "1"
    )
    assert result.returncode == 2
    assert result.stderr.startswith("replay: ")
    assert result.stdout == ""
