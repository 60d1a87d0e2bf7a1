"""Integer sysctls on macOS: ``sysctlbyname`` through ctypes (no fork; libSystem is always
there). Off macOS, or for a name the kernel does not know, every reading is None."""

from __future__ import annotations

import ctypes
import functools
import os
import sys
from collections.abc import Callable
from typing import Any

Reader = Callable[[str], "int | None"]

# The macOS tools mpsd runs (vm_stat, the probes) print numbers in the C locale.
C_LOCALE = {"LC_ALL": "C", "LANG": "C"}


def c_env() -> dict[str, str]:
    return {**os.environ, **C_LOCALE}


@functools.cache
def libsystem_function(name: str, *argtypes: Any) -> Callable[..., int] | None:
    """libSystem's C function ``name`` (returning an int) with its exact prototype; None off
    macOS. dlopen finds libSystem in the shared cache."""
    if sys.platform != "darwin":
        return None
    try:
        function = getattr(ctypes.CDLL("/usr/lib/libSystem.B.dylib", use_errno=True), name)
    except (OSError, AttributeError):
        return None
    function.restype, function.argtypes = ctypes.c_int, list(argtypes)
    return function


@functools.cache
def _sysctlbyname() -> Callable[..., int] | None:
    void, size = ctypes.c_void_p, ctypes.c_size_t
    return libsystem_function(
        "sysctlbyname", ctypes.c_char_p, void, ctypes.POINTER(size), void, size
    )


def read(name: str) -> int | None:
    """One integer sysctl (4 or 8 bytes, unsigned); None on failure or off macOS."""
    function = _sysctlbyname()
    if function is None:
        return None
    buffer = ctypes.create_string_buffer(8)
    size = ctypes.c_size_t(8)
    failed = function(name.encode(), buffer, ctypes.byref(size), None, 0) != 0
    if failed or size.value not in (4, 8):
        return None
    return int.from_bytes(buffer.raw[: size.value], sys.byteorder)
