"""The public faces of ``nki.language`` and ``nki.isa``: the NKI API and nothing else.

The implementation modules import emulator helpers (``current`` returns the kernel
context and with it the caller's trace; ``f32`` returns a tile's numbers as a NumPy
array; ``write`` stores arbitrary host values into a tile). Kernel code must reach none
of them, or it could do free host-side NumPy work or rewrite its own trace. A facade
module forwards only names that are NKI API: everything the implementation module
defines itself, plus data (dtypes, buffers, enums, ``tile_size``) and a short allowlist
of API objects defined elsewhere; upper-case module constants are implementation tables.
"""

from __future__ import annotations

import types
from typing import Any

from .ops import not_emulated

__all__ = ["api_module"]

#: Implementation modules whose functions and classes are emulator internals.
_INTERNAL_PREFIXES = (
    "nkiagent.emu.ops",
    "nkiagent.emu.memory",
    "nkiagent.emu.errors",
    "nkiagent.emu.alu",
    "nkiagent.emu.targets",
    "nkiagent.emu.trace",
    "nkiagent.emu.frontend",
    "nkiagent.emu.tensor",
    "nkiagent.emu.dtypes",
    "nkiagent.emu.registry",
    "typing",
    "collections",
    "contextlib",
    "abc",
    "__future__",
)
#: API objects that live in an internal module but are part of the public NKI surface.
_FOREIGN_API = frozenset({"ds", "NkiTensor"})


def _is_public(impl: types.ModuleType, name: str) -> bool:
    if name.startswith("_") or name.isupper() or name not in vars(impl):
        return False
    value = vars(impl)[name]
    if isinstance(value, types.ModuleType):
        return False
    if name in _FOREIGN_API:
        return True
    if isinstance(value, (types.FunctionType, types.BuiltinFunctionType, type)):
        module = getattr(value, "__module__", "") or ""
    else:
        module = type(value).__module__
        if module.startswith("nkiagent.emu."):
            return True  # data objects: buffers, tile_size, enum members
    return not module.startswith(_INTERNAL_PREFIXES)


def api_module(name: str, impl: types.ModuleType) -> types.ModuleType:
    """A module object named ``name`` that exposes only the public NKI names of ``impl``."""

    def public_names() -> list[str]:
        return sorted(n for n in vars(impl) if _is_public(impl, n))

    class ApiModule(types.ModuleType):
        def __getattr__(self, attr: str) -> Any:
            if attr == "__all__":
                return public_names()
            if attr.startswith("__"):
                raise AttributeError(attr)  # Python's own probes (__file__, __path__ …) must see a plain miss
            if not _is_public(impl, attr):
                raise not_emulated(attr, name, public_names())
            value = getattr(impl, attr)
            setattr(self, attr, value)  # later look-ups skip this method
            return value

        def __dir__(self) -> list[str]:
            return public_names()

    return ApiModule(name, impl.__doc__)
