"""The ctypes Metal reading, with a fake libobjc and Metal standing in for the real ones: every
line but the Objective-C calls themselves runs here (tests/macos compares the real reading
with torch.mps.recommended_max_memory() on a Mac)."""

from __future__ import annotations

import ctypes
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from mpsd.machine import metal, recommended

DEVICE = 0x6000_0000_1000
M4_MAX_36 = 30_150_670_336  # the 36 GB M4 Max of docs/macos-and-pytorch.md


class Function:
    """A C function as ctypes shows it: callable, with restype and argtypes to set."""

    def __init__(self, body: Any) -> None:
        self.body = body
        self.restype: Any = None
        self.argtypes: Any = None
        self.calls: list[tuple[Any, ...]] = []

    def __call__(self, *args: Any) -> Any:
        self.calls.append(args)
        return self.body(*args)


# A real C function, so that metal.py casts it as it casts the real objc_msgSend: a ctypes
# callback with the widest signature; called through a narrower prototype, the extra
# argument is whatever the register holds, and the fake ignores it.
SEND = ctypes.CFUNCTYPE(ctypes.c_uint64, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint64)
ARRAY, INTEGRATED, LOW_POWER = 0x6000_0000_0100, 0x6000_0000_1800, 0x6000_0000_2000


class FakeObjc:
    """libobjc with an NSArray of ``listed`` devices; ``devices``: address -> (isLowPower,
    working set) of every device, the default one included."""

    def __init__(self, listed: dict[int, tuple[bool, int]]) -> None:
        self.selectors: dict[bytes, int] = {}
        self.listed = list(listed)
        self.devices = {**listed, DEVICE: (False, M4_MAX_36)}
        self.sent: list[tuple[bytes, int]] = []
        self.released: list[int] = []
        self.fail: bytes | None = None
        self.sel_registerName = Function(self._register)
        self.objc_msgSend = SEND(self._send)

    def _register(self, name: bytes) -> int:
        return self.selectors.setdefault(name, 0x1000 + len(self.selectors))

    def _send(self, receiver: int, selector: int, argument: int) -> int:
        name = next(n for n, s in self.selectors.items() if s == selector)
        self.sent.append((name, receiver))
        if name == self.fail:
            return 0
        if name == b"release":
            self.released.append(receiver)
            return 0
        if receiver == ARRAY:
            if name == b"count":
                return len(self.listed)
            assert name == b"objectAtIndex:", name
            return self.listed[argument]
        low_power, value = self.devices[receiver]
        return {b"isLowPower": int(low_power), b"recommendedMaxWorkingSetSize": value}[name]


class FakeMetal:
    def __init__(self, all_devices: int | None, default: int | None) -> None:
        self.MTLCopyAllDevices = Function(lambda: all_devices)
        self.MTLCreateSystemDefaultDevice = Function(lambda: default)


def libraries(
    devices: dict[int, tuple[bool, int]] | None = None,
    array: int | None = ARRAY,
    default: int | None = DEVICE,
) -> metal.Libraries:
    found = {INTEGRATED: (False, M4_MAX_36)} if devices is None else devices
    return metal.Libraries(FakeObjc(found), FakeMetal(array, default))


def test_each_selector_is_sent_through_its_own_exact_prototype() -> None:
    """(id, SEL, ...) -> restype per selector, as docs/macos-and-pytorch.md lists them."""
    c = ctypes
    assert {
        b"count": (c.c_uint64,),
        b"objectAtIndex:": (c.c_void_p, c.c_uint64),
        b"isLowPower": (c.c_bool,),
        b"recommendedMaxWorkingSetSize": (c.c_uint64,),
        b"release": (None,),
    } == metal.SIGNATURES
    libs = libraries()
    assert metal.working_set_size(lambda: libs) == M4_MAX_36
    # The shared function itself is never given argtypes or a restype of one selector.
    assert libs.objc.objc_msgSend.argtypes == SEND._argtypes_
    assert libs.objc.objc_msgSend.restype is ctypes.c_uint64
    assert libs.metal.MTLCopyAllDevices.restype is ctypes.c_void_p
    assert libs.objc.sel_registerName.argtypes == [ctypes.c_char_p]


def test_the_first_device_that_is_not_low_power_is_read_and_the_array_released() -> None:
    libs = libraries({LOW_POWER: (True, 1536 << 20), INTEGRATED: (False, M4_MAX_36)})
    assert metal.working_set_size(lambda: libs) == M4_MAX_36
    objc = libs.objc
    assert (b"recommendedMaxWorkingSetSize", LOW_POWER) not in objc.sent
    assert objc.released == [ARRAY]  # objectAtIndex: returns devices the array owns
    assert libs.metal.MTLCreateSystemDefaultDevice.calls == []


def test_without_a_device_in_the_list_the_default_device_is_read_and_released() -> None:
    for array, listed in ((None, {}), (ARRAY, {}), (ARRAY, {LOW_POWER: (True, 1 << 30)})):
        libs = libraries(listed, array=array)
        assert metal.working_set_size(lambda libs=libs: libs) == M4_MAX_36, (array, listed)
        assert libs.objc.released[-1] == DEVICE
        assert (b"recommendedMaxWorkingSetSize", LOW_POWER) not in libs.objc.sent


def test_no_metal_device_at_all_is_no_answer() -> None:
    libs = libraries({}, array=None, default=None)
    assert metal.working_set_size(lambda: libs) is None
    assert libs.objc.sent == []


def test_a_zero_working_set_is_no_answer() -> None:
    libs = libraries({0x6000_0000_3000: (False, 0)}, array=ARRAY, default=None)
    assert metal.working_set_size(lambda: libs) is None


def test_on_linux_the_real_libraries_are_not_there() -> None:
    if sys.platform == "darwin":
        pytest.skip("a Mac has them")
    assert metal.load_libraries() is None
    assert metal.working_set_size() is None


def test_a_failing_call_is_no_answer_and_what_was_obtained_is_still_released() -> None:
    libs = libraries()

    def fails() -> int:
        raise OSError("no default device")

    libs.metal.MTLCreateSystemDefaultDevice.body = fails
    libs.objc.fail = b"recommendedMaxWorkingSetSize"  # reads 0: falls back to the default
    assert metal.working_set_size(lambda: libs) is None
    assert libs.objc.released == [ARRAY]


def test_metal_is_asked_first_and_torch_only_when_metal_has_no_answer() -> None:
    asked: list[str] = []

    def from_metal(value: int | None) -> Any:
        def read() -> int | None:
            asked.append("metal")
            return value

        return read

    def from_torch() -> int:
        asked.append("torch")
        return 5 << 30

    assert metal.answer("darwin", from_metal(M4_MAX_36), from_torch) == {
        "bytes": M4_MAX_36,
        "source": "metal",
    }
    assert asked == ["metal"]
    asked.clear()
    assert metal.answer("darwin", from_metal(None), from_torch) == {
        "bytes": 5 << 30,
        "source": "torch",
    }
    assert asked == ["metal", "torch"]
    asked.clear()
    assert metal.answer("linux", from_metal(M4_MAX_36), lambda: None) == {
        "error": "neither a Metal device nor torch with MPS"
    }
    assert asked == []


def _fake_torch(directory: Path, body: str) -> None:
    package = directory / "torch"
    package.mkdir()
    (package / "__init__.py").write_text(textwrap.dedent(body))


def test_the_probe_program_runs_on_its_own_and_reports_torchs_value(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The probe python needs no mpsd: it runs metal.py's source as given."""
    _fake_torch(
        tmp_path,
        f"""\
        class _Mps:
            def is_available(self): return True
        class backends:
            mps = _Mps()
        class mps:
            @staticmethod
            def recommended_max_memory(): return {M4_MAX_36}
        """,
    )
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    expected = "metal" if sys.platform == "darwin" else "torch"
    found = recommended.probe_subprocess()
    assert found is not None and found[1] == expected
    if expected == "torch":
        assert found == (M4_MAX_36, "torch")


def test_a_torch_older_than_2_5_gives_no_answer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if sys.platform == "darwin":
        pytest.skip("a Mac answers from Metal first")
    _fake_torch(
        tmp_path,
        """\
        class _Mps:
            def is_available(self): return True
        class backends:
            mps = _Mps()
        class mps:
            pass
        """,
    )
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    assert recommended.probe_subprocess() is None
    code = recommended.probe_code()
    assert "import mpsd" not in code and "from mpsd" not in code
