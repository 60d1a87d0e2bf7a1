"""Metal's ``recommendedMaxWorkingSetSize`` read through ctypes (no pyobjc, no torch).

Also the probe program that ``mpsd.machine.recommended`` runs with ``python -c`` (a process
that dlopens Metal keeps it mapped), so it imports only the standard library.
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
    """libobjc and Metal, or the tests' fakes of them."""

    objc: Any
    metal: Any


# Each selector's own C prototype: (restype, arguments after id self and SEL _cmd). arm64
# passes arguments by type, so objc_msgSend is cast to one exact function type per selector:
# one shared objc_msgSend with changing argtypes breaks at the second signature.
SIGNATURES: dict[bytes, tuple[Any, ...]] = {
    b"count": (ctypes.c_uint64,),
    b"objectAtIndex:": (ctypes.c_void_p, ctypes.c_uint64),
    b"isLowPower": (ctypes.c_bool,),
    b"recommendedMaxWorkingSetSize": (ctypes.c_uint64,),
    b"release": (None,),
}


def load_libraries() -> Libraries | None:
    """The real libraries, None where they cannot be loaded (not a Mac)."""
    try:
        ctypes.CDLL(COREGRAPHICS)
        return Libraries(ctypes.CDLL(OBJC), ctypes.CDLL(METAL))
    except OSError:
        return None


def working_set_size(load: Callable[[], Libraries | None] = load_libraries) -> int | None:
    """Of the first device that is not low-power (as PyTorch picks it), else of the system
    default device (MLX's fallback); None when there is none or anything fails."""
    libraries = load()
    if libraries is None:
        return None
    objc, metal = libraries
    try:
        objc.sel_registerName.restype = ctypes.c_void_p
        objc.sel_registerName.argtypes = [ctypes.c_char_p]
        address = ctypes.cast(objc.objc_msgSend, ctypes.c_void_p).value or 0
        send = {
            name: (
                ctypes.CFUNCTYPE(restype, ctypes.c_void_p, ctypes.c_void_p, *args)(address),
                objc.sel_registerName(name),
            )
            for name, (restype, *args) in SIGNATURES.items()
        }

        def message(name: bytes, receiver: int, *args: int) -> Any:
            function, selector = send[name]
            return function(receiver, selector, *args)

        for create in (metal.MTLCopyAllDevices, metal.MTLCreateSystemDefaultDevice):
            create.restype, create.argtypes = ctypes.c_void_p, []
        value = 0
        devices = metal.MTLCopyAllDevices()  # an NSArray the caller owns
        try:
            for index in range(message(b"count", devices) if devices else 0):
                device = message(b"objectAtIndex:", devices, index)
                if device and not message(b"isLowPower", device):
                    value = message(b"recommendedMaxWorkingSetSize", device)
                    break
        finally:
            if devices:
                message(b"release", devices)
        device = None if value else metal.MTLCreateSystemDefaultDevice()
        if device:
            try:
                value = message(b"recommendedMaxWorkingSetSize", device)
            finally:  # the Create rule: we own one reference
                message(b"release", device)
    except (AttributeError, OSError, TypeError, ValueError, ctypes.ArgumentError):
        return None
    value = int(value or 0)
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
    """What the probe prints: Metal first (milliseconds), then torch (seconds)."""
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
