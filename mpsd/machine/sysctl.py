"""Integer sysctls on macOS: ``sysctlbyname`` through ctypes (no fork), else ``sysctl -n``.

Off macOS, or for a name the kernel does not know, every reader returns None.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import subprocess
import sys
from collections.abc import Callable, Iterable

from mpsd.machine.macos import sysctl_int

Reader = Callable[[str], "int | None"]

# `sysctl` prints decimals with the locale's separator: always ask for C.
C_LOCALE = {"LC_ALL": "C", "LANG": "C"}


def c_env() -> dict[str, str]:
    return {**os.environ, **C_LOCALE}


def libsystem() -> ctypes.CDLL:
    """macOS's libSystem (libc, libproc); dlopen finds it in the shared cache."""
    try:
        return ctypes.CDLL("/usr/lib/libSystem.B.dylib", use_errno=True)
    except OSError:
        return ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)


class _Libc:
    """``sysctlbyname`` from libc, loaded once; None off macOS."""

    def __init__(self) -> None:
        self.function: Callable[..., int] | None = None
        if sys.platform != "darwin":
            return
        try:
            function = libsystem().sysctlbyname
        except (OSError, AttributeError):
            return
        function.restype = ctypes.c_int
        function.argtypes = [
            ctypes.c_char_p,
            ctypes.c_void_p,
            ctypes.POINTER(ctypes.c_size_t),
            ctypes.c_void_p,
            ctypes.c_size_t,
        ]
        self.function = function


_libc: _Libc | None = None


def ctypes_reader(name: str) -> int | None:
    """One integer sysctl (4 or 8 bytes, unsigned) by ``sysctlbyname``; None on failure."""
    global _libc
    if _libc is None:
        _libc = _Libc()
    if _libc.function is None:
        return None
    buffer = ctypes.create_string_buffer(8)
    size = ctypes.c_size_t(8)
    if _libc.function(name.encode(), buffer, ctypes.byref(size), None, 0) != 0:
        return None
    if size.value not in (4, 8):
        return None
    return int.from_bytes(buffer.raw[: size.value], sys.byteorder)


def command_reader(name: str, timeout: float = 5.0) -> int | None:
    """One integer sysctl by ``sysctl -n NAME`` (a fork: the fallback)."""
    try:
        done = subprocess.run(
            ["sysctl", "-n", name],
            capture_output=True,
            text=True,
            env=c_env(),
            timeout=timeout,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if done.returncode != 0:
        return None
    return sysctl_int(done.stdout, name)


def read_all(names: Iterable[str], readers: Iterable[Reader]) -> dict[str, int | None]:
    """Each name from the first reader that knows it: a later reader (the ``sysctl -n``
    fork) is asked only for the names the earlier ones could not read."""
    values: dict[str, int | None] = {name: None for name in names}
    for reader in readers:
        missing = [name for name, value in values.items() if value is None]
        if not missing:
            break
        for name in missing:
            values[name] = reader(name)
    return values


def default_readers() -> list[Reader]:
    if sys.platform != "darwin":
        return []
    return [ctypes_reader, command_reader]
