"""recommended_max(): the probe order, the cache and when it is probed again."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from mpsd import paths
from mpsd.machine import recommended
from mpsd.ratio import GIB, estimate_recommended_max

MAC_48 = 48 * GIB
TORCH_48 = 40200893440  # what docs/file-formats.md shows for the article's 48 GB Mac


class FakeMac:
    """A Mac as the cache sees it: OS version, wired limit, and a probe that counts."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.os = "Darwin 15.1 24.1.0"
        self.limit: int | None = 0
        self.answer: tuple[int, str] | None = (TORCH_48, "torch")
        self.probes = 0
        self.now = 1_800_000_000.0
        monkeypatch.setattr(recommended, "current_platform", lambda: "darwin")
        monkeypatch.setattr(recommended, "os_version", lambda: self.os)
        monkeypatch.setattr(recommended, "wired_limit_bytes", lambda: self.limit)
        monkeypatch.setattr(recommended, "probe_subprocess", self.probe)
        monkeypatch.setattr(recommended.time, "time", lambda: self.now)

    def probe(self, python: str | None = None, timeout: float = 0) -> tuple[int, str] | None:
        self.probes += 1
        return self.answer


@pytest.fixture
def mac(monkeypatch: pytest.MonkeyPatch) -> FakeMac:
    return FakeMac(monkeypatch)


def test_the_probe_runs_once_and_the_answer_is_cached_with_its_facts(mac: FakeMac) -> None:
    assert recommended.recommended_max(MAC_48) == (TORCH_48, "torch")
    assert recommended.recommended_max(MAC_48) == (TORCH_48, "torch")
    assert mac.probes == 1
    cache = json.loads(paths.recommended_max_cache().read_text())
    assert cache["bytes"] == TORCH_48
    assert cache["source"] == "torch"
    assert "boot_time" not in cache
    assert cache["os_version"] == "Darwin 15.1 24.1.0"
    assert cache["date"].startswith("2027-01-15")
    assert cache["total_ram"] == MAC_48


def test_a_real_value_outlives_a_reboot_and_a_later_probe_that_finds_less(
    mac: FakeMac, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The value depends on the OS version, the RAM and the override, not the boot; Metal may
    not answer in the agent, so a refresh that finds only the estimate keeps the real value."""
    path = paths.recommended_max_cache()
    path.parent.mkdir(parents=True, exist_ok=True)
    old = {"bytes": TORCH_48, "source": "metal", "date": "2026-01-01T00:00:00+00:00"}
    old |= {"boot_time": 1.0, "os_version": mac.os, "total_ram": MAC_48, "wired_limit_bytes": 0}
    path.write_text(json.dumps(old))  # written before the last reboot, by an older mpsd
    assert recommended.recommended_max(MAC_48) == (TORCH_48, "metal")
    assert mac.probes == 0
    mac.answer = None
    assert recommended.recommended_max(MAC_48, refresh=True) == (TORCH_48, "metal")
    assert mac.probes == 1
    mac.limit = 26000 << 20  # the override changed: the old value is no longer true
    assert recommended.recommended_max(MAC_48) == (26000 << 20, "iogpu")


def test_install_seeds_the_cache_from_a_fresh_probe(
    mac: FakeMac, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(recommended.sysctl, "read", {"hw.memsize": MAC_48}.get)
    recommended.recommended_max(MAC_48)
    mac.answer = (TORCH_48 + GIB, "metal")
    recommended.seed()
    assert mac.probes == 2
    cache = json.loads(paths.recommended_max_cache().read_text())
    assert (cache["bytes"], cache["source"]) == (TORCH_48 + GIB, "metal")
    assert cache["total_ram"] == MAC_48
    monkeypatch.setattr(recommended, "current_platform", lambda: "linux")
    recommended.seed()  # nothing to seed off macOS
    assert mac.probes == 2


def test_an_os_update_probes_again(mac: FakeMac) -> None:
    recommended.recommended_max(MAC_48)
    mac.os = "Darwin 15.2 24.2.0"
    recommended.recommended_max(MAC_48)
    assert mac.probes == 2


def test_a_new_iogpu_wired_limit_probes_again(mac: FakeMac) -> None:
    recommended.recommended_max(MAC_48)
    mac.limit = 40000 << 20
    mac.answer = (40000 << 20, "metal")
    assert recommended.recommended_max(MAC_48) == (40000 << 20, "metal")
    assert mac.probes == 2


def test_refresh_probes_whatever_the_cache_says(mac: FakeMac) -> None:
    recommended.recommended_max(MAC_48)
    recommended.recommended_max(MAC_48, refresh=True)
    assert mac.probes == 2


@pytest.mark.parametrize(
    "content",
    [
        "",
        "{not json",
        "[]",
        json.dumps(
            {
                "bytes": 1,
                "source": "guess",
                "date": "2027-01-15T00:00:00+00:00",
                "os_version": "Darwin 15.1 24.1.0",
                "total_ram": MAC_48,
            }
        ),
    ],
)
def test_a_broken_cache_is_probed_over(mac: FakeMac, content: str) -> None:
    path = paths.recommended_max_cache()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content)
    assert recommended.recommended_max(MAC_48) == (TORCH_48, "torch")
    assert mac.probes == 1
    assert json.loads(path.read_text())["source"] == "torch"


def test_without_torch_or_metal_a_set_wired_limit_is_used(mac: FakeMac) -> None:
    mac.answer = None
    mac.limit = 26000 << 20
    assert recommended.recommended_max(32 * GIB) == (26000 << 20, "iogpu")


@pytest.mark.parametrize(
    ("sysctls", "expected"),
    [
        ({"iogpu.wired_limit_mb": 26000}, 26000 << 20),  # macOS 14+, as llmfit#570 set it
        ({"iogpu.wired_limit_mb": 0}, 0),  # not set: Metal's default
        ({"debug.iogpu.wired_limit": 27_000_000_000}, 27_000_000_000),  # macOS 13: bytes
        ({"debug.iogpu.wired_limit": 0}, 0),
        ({"iogpu.wired_limit_mb": 0, "debug.iogpu.wired_limit": 5 << 30}, 5 << 30),
        ({}, None),  # neither sysctl exists
    ],
)
def test_the_wired_limit_override_is_read_from_either_sysctl(
    monkeypatch: pytest.MonkeyPatch, sysctls: dict[str, int], expected: int | None
) -> None:
    monkeypatch.setattr(recommended, "current_platform", lambda: "darwin")
    monkeypatch.setattr(recommended.sysctl, "read", sysctls.get)
    assert recommended.wired_limit_bytes() == expected


def test_the_wired_limit_is_not_looked_for_off_macos(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(recommended, "current_platform", lambda: "linux")
    monkeypatch.setattr(recommended.sysctl, "read", {"iogpu.wired_limit_mb": 9}.get)
    assert recommended.wired_limit_bytes() is None


def test_without_any_probe_the_estimate_is_used_and_probed_again_after_a_day(
    mac: FakeMac,
) -> None:
    mac.answer = None
    assert recommended.recommended_max(MAC_48) == (MAC_48 * 85 // 100, "estimate")
    mac.now += 3600
    recommended.recommended_max(MAC_48)
    assert mac.probes == 1
    mac.now += 24 * 3600
    mac.answer = (TORCH_48, "torch")  # torch was installed since
    assert recommended.recommended_max(MAC_48) == (TORCH_48, "torch")
    assert mac.probes == 2


def test_an_unwritable_state_dir_still_answers(
    mac: FakeMac, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("MPSD_STATE_DIR", str(blocker / "state"))
    assert recommended.recommended_max(MAC_48) == (TORCH_48, "torch")


# --- on this Linux machine, for real ----------------------------------------------------------


def test_on_linux_it_is_the_estimate_from_ram_without_a_probe(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    if sys.platform == "darwin":
        pytest.skip("a Mac probes for real")

    def no_probe(python: str | None = None, timeout: float = 0) -> None:
        raise AssertionError("nothing to probe off macOS")

    monkeypatch.setattr(recommended, "probe_subprocess", no_probe)
    assert recommended.recommended_max(16 * GIB) == (14602888806, "estimate")
    assert recommended.recommended_max(64 * GIB) == (58411555225, "estimate")
    assert recommended.recommended_max(36 * GIB) == (estimate_recommended_max(36 * GIB), "estimate")
    cache = json.loads(paths.recommended_max_cache().read_text())
    assert cache["source"] == "estimate" and cache["wired_limit_bytes"] is None


# recommendedMaxWorkingSetSize observed on Apple Silicon (docs/macos-and-pytorch.md): RAM in
# GiB -> the highest value seen for that RAM, in bytes.
OBSERVED = {
    8: round(5.33 * GIB),
    16: round(11.84 * GIB),
    24: round(17.76 * GIB),
    32: round(24.96 * GIB),
    36: round(28.08 * GIB),
    48: round(37.44 * GIB),
    64: 48 * GIB,
    96: 72 * GIB,
    128: round(107.52 * GIB),
}


@pytest.mark.parametrize("ram", sorted(OBSERVED))
def test_the_estimate_is_above_every_value_observed_on_apple_silicon(ram: int) -> None:
    """Too low an estimate makes PyTorch's real cap higher than mpsd meant: it errs high."""
    assert estimate_recommended_max(ram * GIB) > OBSERVED[ram]
    assert estimate_recommended_max(ram * GIB) < ram * GIB


def _stand_in(tmp_path: Path, body: str) -> str:
    path = tmp_path / "python-stand-in"
    path.write_text("#!/bin/sh\n" + textwrap.dedent(body))
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def test_probe_subprocess_reads_what_the_probe_python_prints(tmp_path: Path) -> None:
    python = _stand_in(
        tmp_path,
        f"""\
        [ "$1" = -c ] || exit 9
        echo "some warning torch printed"
        echo '{{"bytes": {TORCH_48}, "source": "torch"}}'
        """,
    )
    assert recommended.probe_subprocess(python) == (TORCH_48, "torch")


def test_probe_subprocess_runs_without_the_watermark_variables(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYTORCH_MPS_HIGH_WATERMARK_RATIO", "garbage")
    python = _stand_in(
        tmp_path,
        """\
        [ -z "${PYTORCH_MPS_HIGH_WATERMARK_RATIO+x}" ] || exit 3
        echo '{"bytes": 123456789, "source": "metal"}'
        """,
    )
    assert recommended.probe_subprocess(python) == (123456789, "metal")


@pytest.mark.parametrize(
    "body",
    [
        'echo \'{"error": "neither torch with MPS nor a Metal device"}\'',
        "echo not json",
        'echo \'{"bytes": 0, "source": "torch"}\'',
        'echo \'{"bytes": 5, "source": "estimate"}\'',
        'echo \'{"bytes": "5", "source": "torch"}\'',
        'echo \'{"bytes": 5, "source": "torch"}\'; exit 1',
        "exit 0",
        "exec sleep 30",
    ],
)
def test_probe_subprocess_that_finds_nothing_or_misbehaves_is_none(
    tmp_path: Path, body: str
) -> None:
    python = _stand_in(tmp_path, body + "\n")
    assert recommended.probe_subprocess(python, timeout=0.5) is None


def test_probe_subprocess_with_a_missing_python_is_none(tmp_path: Path) -> None:
    assert recommended.probe_subprocess(str(tmp_path / "no-such-python")) is None


@pytest.mark.slow
def test_the_real_probe_code_on_linux_finds_no_mps_and_the_caller_never_imports_torch() -> None:
    """The probe runs with the venv's python (torch CPU is there, MPS is not)."""
    if sys.platform == "darwin":
        pytest.skip("tests/macos checks the real probe on a Mac")
    code = textwrap.dedent(
        """\
        import sys
        from mpsd.machine import recommended
        recommended.current_platform = lambda: "darwin"
        recommended.wired_limit_bytes = lambda: None
        print(recommended.recommended_max(16 << 30))
        print("torch" in sys.modules)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=180,
        env=dict(os.environ),
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["(14602888806, 'estimate')", "False"]
