"""The macOS ctypes calls, driven through real ctypes callbacks standing in for libSystem:
the buffer sizes, widths and offsets must match Apple's declarations (sys/sysctl.h,
sys/resource.h), which are written out here independently."""

from __future__ import annotations

import ctypes

import pytest

from mpsd.machine import mljobs, sysctl

U64 = ctypes.c_uint64


class RusageInfoV4(ctypes.Structure):
    """struct rusage_info_v4 from <sys/resource.h> (v0's fields, then v1's to v4's)."""

    _fields_ = [
        ("ri_uuid", ctypes.c_uint8 * 16),
        ("ri_user_time", U64),
        ("ri_system_time", U64),
        ("ri_pkg_idle_wkups", U64),
        ("ri_interrupt_wkups", U64),
        ("ri_pageins", U64),
        ("ri_wired_size", U64),
        ("ri_resident_size", U64),
        ("ri_phys_footprint", U64),
        ("ri_proc_start_abstime", U64),
        ("ri_proc_exit_abstime", U64),
        ("ri_child_user_time", U64),
        ("ri_child_system_time", U64),
        ("ri_child_pkg_idle_wkups", U64),
        ("ri_child_interrupt_wkups", U64),
        ("ri_child_pageins", U64),
        ("ri_child_elapsed_abstime", U64),
        ("ri_diskio_bytesread", U64),
        ("ri_diskio_byteswritten", U64),
        ("ri_cpu_time_qos_default", U64),
        ("ri_cpu_time_qos_maintenance", U64),
        ("ri_cpu_time_qos_background", U64),
        ("ri_cpu_time_qos_utility", U64),
        ("ri_cpu_time_qos_legacy", U64),
        ("ri_cpu_time_qos_user_initiated", U64),
        ("ri_cpu_time_qos_user_interactive", U64),
        ("ri_billed_system_time", U64),
        ("ri_serviced_system_time", U64),
        ("ri_logical_writes", U64),
        ("ri_lifetime_max_phys_footprint", U64),
        ("ri_instructions", U64),
        ("ri_cycles", U64),
        ("ri_billed_energy", U64),
        ("ri_serviced_energy", U64),
        ("ri_interval_max_phys_footprint", U64),
        ("ri_runnable_time", U64),
    ]


RUSAGE = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_void_p)
SYSCTLBYNAME = ctypes.CFUNCTYPE(
    ctypes.c_int,
    ctypes.c_char_p,
    ctypes.c_void_p,
    ctypes.POINTER(ctypes.c_size_t),
    ctypes.c_void_p,
    ctypes.c_size_t,
)


def test_phys_footprint_and_its_lifetime_maximum_are_read_from_rusage_info_v4(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[tuple[int, int]] = []

    def proc_pid_rusage(pid: int, flavor: int, buffer: int) -> int:
        calls.append((pid, flavor))
        info = RusageInfoV4(
            ri_resident_size=111 << 20,
            ri_phys_footprint=3 << 30,
            ri_logical_writes=7,
            ri_lifetime_max_phys_footprint=5 << 30,
        )
        ctypes.memmove(buffer, ctypes.byref(info), ctypes.sizeof(info))
        return 0

    monkeypatch.setattr(mljobs, "_proc_pid_rusage", lambda: RUSAGE(proc_pid_rusage))
    assert mljobs.footprint(4242) == (3 << 30, 5 << 30)
    assert calls == [(4242, 4)]  # RUSAGE_INFO_V4
    assert ctypes.sizeof(RusageInfoV4) == mljobs.RUSAGE_SIZE


def test_a_failed_proc_pid_rusage_is_none(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(mljobs, "_proc_pid_rusage", lambda: RUSAGE(lambda pid, fl, buf: -1))
    assert mljobs.footprint(1) is None


@pytest.mark.parametrize(
    ("ctype", "value"),
    [(ctypes.c_uint32, 4_000_000_000), (ctypes.c_int32, 4), (U64, 34359738368)],
)
def test_sysctlbyname_values_of_4_and_8_bytes_are_read_whole(
    monkeypatch: pytest.MonkeyPatch, ctype: type[ctypes._SimpleCData[int]], value: int
) -> None:
    names: list[bytes] = []

    def sysctlbyname(
        name: bytes, old: int, size: ctypes._Pointer[ctypes.c_size_t], new: int, n: int
    ) -> int:
        names.append(name)
        assert size.contents.value >= ctypes.sizeof(ctype)
        ctypes.memmove(old, ctypes.byref(ctype(value)), ctypes.sizeof(ctype))
        size.contents.value = ctypes.sizeof(ctype)
        return 0

    monkeypatch.setattr(sysctl, "_sysctlbyname", lambda: SYSCTLBYNAME(sysctlbyname))
    assert sysctl.read("vm.page_free_count") == value
    assert names == [b"vm.page_free_count"]


def test_an_unknown_sysctl_is_none(monkeypatch: pytest.MonkeyPatch) -> None:
    failing = SYSCTLBYNAME(lambda name, old, size, new, n: -1)
    monkeypatch.setattr(sysctl, "_sysctlbyname", lambda: failing)
    assert sysctl.read("iogpu.wired_limit_mb") is None
