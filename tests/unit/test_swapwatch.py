from __future__ import annotations

import json
from pathlib import Path

import pytest

from mpsd import swapwatch
from tests.conftest import FIXTURES as _MAIN_FIXTURES

# From a worktree (/work/wt/<name>) the shared fixtures sit two levels further up.
FIXTURES = next(
    (
        path
        for path in (_MAIN_FIXTURES, Path(__file__).resolve().parents[4] / "shared" / "fixtures")
        if path.is_dir()
    ),
    _MAIN_FIXTURES,
)


def _outputs(command_prefix: str) -> list[dict[str, str]]:
    path = FIXTURES / "macos" / "command-outputs.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [row for row in rows if row["command"].startswith(command_prefix)]


def test_swapouts_are_read_from_every_recorded_vm_stat_that_prints_them() -> None:
    seen = 0
    for row in _outputs("vm_stat") + _outputs("memory_pressure"):
        lines = [line for line in row["text"].splitlines() if line.startswith("Swapouts:")]
        value = swapwatch.parse_vm_stat_swapouts(row["text"])
        if not lines:
            assert value is None, row["id"]
            continue
        expected = int(lines[0].split(":")[1].strip().rstrip("."))
        assert value == expected, row["id"]
        seen += 1
    assert seen >= 8


def test_the_recorded_swap_counters_keep_their_values() -> None:
    by_id = {row["id"]: row["text"] for row in _outputs("")}
    assert swapwatch.parse_vm_stat_swapouts(by_id["vm_stat-openclaw-mini2-20260529"]) == 16
    assert swapwatch.parse_vm_stat_swapouts(by_id["vm_stat-buntest-16gb-as"]) == 64301281
    assert swapwatch.parse_vm_stat_swapouts(by_id["memory_pressure-openclaw-mini2-20260529"]) == 16


@pytest.mark.parametrize(
    ("text", "level"),
    [("4\n", 4), ("1", 1), ("kern.memorystatus_vm_pressure_level: 2\n", 2), ("", None)],
)
def test_pressure_level_reads_the_sysctl_value(text: str, level: int | None) -> None:
    assert swapwatch.parse_pressure_level(text) == level


def test_linux_swapouts_come_from_pswpout() -> None:
    assert swapwatch.parse_proc_vmstat_swapouts("pswpin 3\npswpout 42\n") == 42
    assert swapwatch.parse_proc_vmstat_swapouts("nr_free_pages 1\n") is None


def test_the_stand_in_swap_counter_is_chosen_by_env_and_read_from_its_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    counter = tmp_path / "swap"
    counter.write_text("7 2\n")
    monkeypatch.setenv("MPSD_PROBE_FAKE_SWAP", str(counter))
    watch = swapwatch.choose_watch()
    assert watch() == (7, 2)
    counter.write_text("9\n")
    assert watch() == (9, None)
    counter.unlink()
    assert watch() == (None, None)


def test_the_daemons_sampler_is_used_when_present_and_a_failure_falls_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import types

    from mpsd.sample import Sample

    calls: list[int] = []

    def take_sample() -> Sample:
        calls.append(1)
        if len(calls) > 1:
            raise RuntimeError("host_statistics64 failed")
        return Sample(t=0.0, available_bytes=1, total_bytes=2, swapouts=5, pressure=2)

    fake = types.ModuleType("mpsd.sampler")
    fake.take_sample = take_sample  # type: ignore[attr-defined]
    monkeypatch.setitem(__import__("sys").modules, "mpsd.sampler", fake)
    # `from mpsd import sampler` takes the package attribute once the real one was imported.
    monkeypatch.setattr(__import__("mpsd"), "sampler", fake, raising=False)
    monkeypatch.delenv("MPSD_PROBE_FAKE_SWAP", raising=False)
    monkeypatch.setattr(swapwatch, "_linux", lambda: (11, None))
    monkeypatch.setattr(swapwatch, "_macos", lambda: (11, None))
    watch = swapwatch.choose_watch()
    assert watch() == (5, 2)
    assert watch() == (11, None)


def test_the_samplers_memory_source_is_preferred_to_a_whole_sample(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import types

    class Source:
        reads = 0

        def read(self) -> object:
            Source.reads += 1
            if Source.reads > 1:
                raise RuntimeError("sysctl failed")
            return types.SimpleNamespace(swapouts=3, pressure=1)

    fake = types.ModuleType("mpsd.sampler")
    fake.default_source = Source  # type: ignore[attr-defined]
    fake.take_sample = lambda: pytest.fail("the process table must not be scanned every step")  # type: ignore[attr-defined]
    monkeypatch.setitem(__import__("sys").modules, "mpsd.sampler", fake)
    # `from mpsd import sampler` takes the package attribute once the real one was imported.
    monkeypatch.setattr(__import__("mpsd"), "sampler", fake, raising=False)
    monkeypatch.delenv("MPSD_PROBE_FAKE_SWAP", raising=False)
    monkeypatch.setattr(swapwatch, "_linux", lambda: (11, None))
    monkeypatch.setattr(swapwatch, "_macos", lambda: (11, None))
    watch = swapwatch.choose_watch()
    assert watch() == (3, 1)
    assert watch() == (11, None)
