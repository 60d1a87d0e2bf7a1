"""Metal's ``recommendedMaxWorkingSetSize`` read through ctypes (no pyobjc, no torch).

This file is also the probe program: ``mpsd.machine.recommended`` runs its source, as is, with
``python -c`` in a short-lived subprocess (a process that dlopens Metal keeps it mapped; the
caller never does). So it imports only the standard library; ``main()`` prints one JSON line.
Metal first (milliseconds), then ``torch.mps.recommended_max_memory()`` (torch >= 2.5; seconds).
The Objective-C calls go through ``Libraries``, the one seam: tests hand in a fake libobjc and
Metal, so everything but the real calls runs on Linux.
"""

from __future__ import annotations

import ctypes
import json
import sys
from collections.abc import Callable
from typing import Any, NamedTuple

OBJC = "/usr/lib/libobjc.A.dylib"
METAL = "/System/Library/Frameworks/Metal.framework/Metal"
# A command-line process finds no Metal device unless CoreGraphics is loaded (it registers
# the GPUs with the process); loading it is enough.
COREGRAPHICS = "/System/Library/Frameworks/CoreGraphics.framework/CoreGraphics"


class Libraries(NamedTuple):
    """libobjc (``sel_registerName``, ``objc_msgSend``) and Metal
    (``MTLCreateSystemDefaultDevice``): anything with those attributes will do."""

    objc: Any
    metal: Any


def load_libraries() -> Libraries | None:
    """The real libraries, None where they cannot be loaded (not a Mac)."""
    try:
        ctypes.CDLL(COREGRAPHICS)
        return Libraries(ctypes.CDLL(OBJC), ctypes.CDLL(METAL))
    except OSError:
        return None


def working_set_size(load: Callable[[], Libraries | None] = load_libraries) -> int | None:
    """``[MTLCreateSystemDefaultDevice() recommendedMaxWorkingSetSize]`` in bytes; None when
    there is no Metal device or anything fails."""
    libraries = load()
    if libraries is None:
        return None
    objc, metal = libraries
    try:
        metal.MTLCreateSystemDefaultDevice.restype = ctypes.c_void_p
        metal.MTLCreateSystemDefaultDevice.argtypes = []
        objc.sel_registerName.restype = ctypes.c_void_p
        objc.sel_registerName.argtypes = [ctypes.c_char_p]
        # objc_msgSend must be called with the method's own prototype (arm64 passes
        # arguments by type): (id self, SEL _cmd) -> uint64_t for this property.
        send = objc.objc_msgSend
        send.restype = ctypes.c_uint64
        send.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
        device = metal.MTLCreateSystemDefaultDevice()
        if not device:
            return None
        try:
            value = send(device, objc.sel_registerName(b"recommendedMaxWorkingSetSize"))
        finally:
            # MTLCreateSystemDefaultDevice follows the Create rule: we own one reference.
            send(device, objc.sel_registerName(b"release"))
    except (AttributeError, OSError, TypeError, ValueError, ctypes.ArgumentError):
        return None
    value = int(value)
    return value if value > 0 else None


def torch_value() -> int | None:
    """``torch.mps.recommended_max_memory()`` (torch >= 2.5) where MPS is available."""
    try:
        import torch

        if not torch.backends.mps.is_available():
            return None
        get = getattr(torch.mps, "recommended_max_memory", None)
        return int(get()) if get is not None else None
    except Exception:  # a broken torch install is a missing answer, never a crash
        return None


def answer(
    platform: str = sys.platform,
    metal: Callable[[], int | None] = working_set_size,
    torch: Callable[[], int | None] = torch_value,
) -> dict[str, object]:
    """What the probe prints: ``{"bytes": N, "source": "metal"|"torch"}`` or ``{"error": ...}``."""
    value = metal() if platform == "darwin" else None
    if value:
        return {"bytes": value, "source": "metal"}
    value = torch()
    if value:
        return {"bytes": value, "source": "torch"}
    return {"error": "neither a Metal device nor torch with MPS"}


def main() -> None:
    print(json.dumps(answer()), flush=True)


if __name__ == "__main__":
    main()
