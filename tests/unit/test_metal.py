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


class FakeObjc:
    def __init__(self, value: int) -> None:
        self.selectors: dict[bytes, int] = {}
        self.value = value
        self.released: list[int] = []
        self.sel_registerName = Function(self._register)
        self.objc_msgSend = Function(self._send)

    def _register(self, name: bytes) -> int:
        return self.selectors.setdefault(name, 0x1000 + len(self.selectors))

    def _send(self, receiver: int, selector: int) -> int:
        name = next(n for n, s in self.selectors.items() if s == selector)
        if name == b"recommendedMaxWorkingSetSize":
            assert receiver == DEVICE
            return self.value
        if name == b"release":
            self.released.append(receiver)
            return 0
        raise AssertionError(f"unexpected message {name!r}")


class FakeMetal:
    def __init__(self, device: int | None) -> None:
        self.MTLCreateSystemDefaultDevice = Function(lambda: device)


def libraries(value: int = M4_MAX_36, device: int | None = DEVICE) -> metal.Libraries:
    return metal.Libraries(FakeObjc(value), FakeMetal(device))


def test_the_working_set_is_read_from_the_default_device_and_the_device_released() -> None:
    libs = libraries()
    assert metal.working_set_size(lambda: libs) == M4_MAX_36
    objc = libs.objc
    assert objc.released == [DEVICE]
    # objc_msgSend is called with the property's own prototype: (id, SEL) -> uint64_t.
    assert objc.objc_msgSend.restype is ctypes.c_uint64
    assert objc.objc_msgSend.argtypes == [ctypes.c_void_p, ctypes.c_void_p]
    assert libs.metal.MTLCreateSystemDefaultDevice.restype is ctypes.c_void_p
    assert objc.sel_registerName.argtypes == [ctypes.c_char_p]


def test_no_metal_device_is_no_answer_and_sends_nothing() -> None:
    libs = libraries(device=None)
    assert metal.working_set_size(lambda: libs) is None
    assert libs.objc.objc_msgSend.calls == []


def test_a_zero_working_set_is_no_answer() -> None:
    assert metal.working_set_size(lambda: libraries(value=0)) is None


def test_on_linux_the_real_libraries_are_not_there() -> None:
    if sys.platform == "darwin":
        pytest.skip("a Mac has them")
    assert metal.load_libraries() is None
    assert metal.working_set_size() is None


def test_a_failing_call_is_no_answer_and_the_device_is_still_released() -> None:
    libs = libraries()
    objc = libs.objc

    def fails(receiver: int, selector: int) -> int:
        if selector == objc.selectors.get(b"release"):
            objc.released.append(receiver)
            return 0
        raise ctypes.ArgumentError("argument 1: wrong type")

    objc.objc_msgSend = Function(fails)
    assert metal.working_set_size(lambda: libs) is None
    assert objc.released == [DEVICE]


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
