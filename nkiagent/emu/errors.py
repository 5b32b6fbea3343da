"""Errors the emulator raises, shaped like the real NKI toolchain's.

Every error carries a stable ``code`` (the legacy ``err_*`` names where AWS documents
one, otherwise a descriptive code), the message, and the kernel's ``file:line``, so that
a model or a person can act on it without reading a Python traceback into the emulator.
"""

from __future__ import annotations

import os
import sys
import warnings
from types import CodeType, FrameType

__all__ = [
    "NkiCapacityError",
    "NkiError",
    "NkiOutOfBoundsError",
    "NkiRuntimeError",
    "NkiTypeError",
    "NkiUnsupportedError",
    "NkiValidationError",
    "NkiWarning",
    "kernel_frame",
    "kernel_location",
    "warn",
]

_EMU_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


#: id(code object) → (the code object, whether it belongs to the emulator or frozen bootstrap code).
#: Keyed by id because hashing a code object digests its bytecode and constants, every time;
#: the entry holds the code object, so its id cannot be reused while the entry exists.
_INTERNAL: dict[int, tuple[CodeType, bool]] = {}


def _internal(code: CodeType) -> bool:
    hit = _INTERNAL.get(id(code))
    if hit is None:
        if len(_INTERNAL) > 4096:  # kernels come and go in a long-lived process: stay bounded
            _INTERNAL.clear()
        hit = _INTERNAL[id(code)] = (code, code.co_filename.startswith((_EMU_DIR, "<frozen")))
    return hit[1]


def kernel_frame(frame: FrameType | None = None) -> FrameType | None:
    """The innermost frame outside the emulator package (the kernel's line being executed), if any.

    Called for every traced instruction, so whether a code object is internal is remembered.
    """
    f = frame if frame is not None else sys._getframe(1)
    known = _INTERNAL
    while f is not None:
        code = f.f_code
        hit = known.get(id(code))
        if not (hit[1] if hit is not None else _internal(code)):
            break
        f = f.f_back
    return f


def kernel_location(frame: FrameType | None = None) -> str:
    """Return ``file:line`` of the innermost frame outside the emulator package.

    Why: errors must point at the line of the user's kernel that caused them, not at
    emulator internals. Walking frames is cheap compared to ``inspect.stack()``.
    """
    f = kernel_frame(frame if frame is not None else sys._getframe(1))
    if f is None:
        return "<unknown>:0"
    # Every traced instruction asks, and a frame's line number is decoded from its code's line
    # table each time: remember the answer per code object and bytecode offset.
    code = f.f_code
    key = (id(code), f.f_lasti)
    hit = _LOCATIONS.get(key)
    if hit is None:
        if len(_LOCATIONS) > 65536:  # kernels come and go in a long-lived process: stay bounded
            _LOCATIONS.clear()
        hit = _LOCATIONS[key] = (code, f"{code.co_filename}:{f.f_lineno}")
    return hit[1]


#: (id(code object), bytecode offset) → (the code object, kept so its id stays unique; ``file:line``)
_LOCATIONS: dict[tuple[int, int], tuple[CodeType, str]] = {}


class NkiError(Exception):
    """Base of every error a kernel can provoke in the emulator.

    Attributes:
        code: stable identifier, e.g. ``err_num_partition_exceed_arch_limit``.
        message: the human message, without location.
        location: ``file:line`` in the kernel source.
    """

    kind = "error"

    def __init__(self, code: str, message: str, location: str | None = None) -> None:
        self.code = code
        self.message = message
        self.location = location if location is not None else kernel_location(sys._getframe(1))
        super().__init__(f"{self.location}: {message} [{code}]")

    def to_dict(self) -> dict[str, str]:
        """JSON-able form for the verifier and the session store."""
        return {"type": type(self).__name__, "code": self.code, "message": self.message, "location": self.location}


class NkiValidationError(NkiError):
    """A hardware or ISA rule was violated (what the real compiler or simulator rejects)."""


class NkiCapacityError(NkiError):
    """SBUF or PSUM capacity or bank rules were violated (the real allocator's errors)."""


class NkiUnsupportedError(NkiError):
    """The kernel used an API the emulator does not provide."""


class NkiOutOfBoundsError(NkiError):
    """A static or dynamic access fell outside a tensor."""


class NkiTypeError(NkiError):
    """Wrong argument kinds or dtypes for an NKI API."""


class NkiRuntimeError(NkiError):
    """Kernel-level failures: outputs never written, API used outside a kernel, …"""


class NkiWarning(UserWarning):
    """Suspicious but legal kernel behaviour (e.g. activation input outside its valid range)."""


def warn(message: str) -> None:
    """Emit an :class:`NkiWarning` attributed to the kernel line."""
    loc = kernel_location(sys._getframe(1))
    file, _, line = loc.rpartition(":")
    warnings.warn_explicit(f"{loc}: {message}", NkiWarning, file or "<kernel>", int(line) if line.isdigit() else 0)
