"""The macOS ctypes calls, driven through real ctypes callbacks standing in for libSystem:
the buffer sizes, widths and offsets must match Apple's declarations (sys/sysctl.h,
sys/resource.h), which are written out here independently."""

from __future__ import annotations

import ctypes

import pytest

from mpsd.machine import mljobs, sysctl

U64 = ctypes.c_uint64


class RusageInfoV0(ctypes.Structure):
    """struct rusage_info_v0 from <sys/resource.h>."""

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


def test_phys_footprint_is_read_from_its_place_in_rusage_info_v0(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[tuple[int, int]] = []

    def proc_pid_rusage(pid: int, flavor: int, buffer: int) -> int:
        calls.append((pid, flavor))
        info = RusageInfoV0(ri_resident_size=111 << 20, ri_phys_footprint=3 << 30)
        ctypes.memmove(buffer, ctypes.byref(info), ctypes.sizeof(info))
        return 0

    monkeypatch.setattr(mljobs, "_proc_pid_rusage", lambda: RUSAGE(proc_pid_rusage))
    assert mljobs.footprint(4242) == 3 << 30
    assert calls == [(4242, 0)]  # RUSAGE_INFO_V0
    assert ctypes.sizeof(RusageInfoV0) == mljobs.RUSAGE_SIZE


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
