"""The emulator's ``nki`` package: what ``import nki`` resolves to after ``nkiagent.emu.install()``."""

from __future__ import annotations

import types as _types

from nkiagent.emu import collectives as _collectives_impl
from nkiagent.emu import dtypes as _dtypes_impl
from nkiagent.emu import isa as _isa_impl
from nkiagent.emu import isa_constants as _constants_impl
from nkiagent.emu import language as _language_impl
from nkiagent.emu.errors import NkiError
from nkiagent.emu.facade import api_module
from nkiagent.emu.frontend import Kernel, jit, simulate

from . import typing

# Kernel code sees only the NKI API, never the emulator helpers these modules import: the
# implementation modules are not left bound here, where `nki._isa_impl` would reach them.
isa = api_module("nki.isa", _isa_impl)
language = api_module("nki.language", _language_impl)
# ``nki.isa`` and ``nki.language`` are packages in AWS's NKI (``import nki.isa.constants``):
# each facade gets a package path and its submodule; ``install()`` registers them all.
isa.__path__ = []  # type: ignore[attr-defined]
language.__path__ = []  # type: ignore[attr-defined]
isa.constants = api_module("nki.isa.constants", _constants_impl)  # type: ignore[attr-defined]
language.dtypes = api_module("nki.language.dtypes", _dtypes_impl)  # type: ignore[attr-defined]
#: ``nki.dtype``: the dtypes module (the library annotates ``dtype: nki.dtype``).
dtype = language.dtypes  # type: ignore[attr-defined]
# Submodules AWS's package has and the emulator does not emulate: any name in them is a clear
# "not emulated" error, not a missing module.
tensor = api_module("nki.tensor", _types.ModuleType("nki.tensor"))
compiler = api_module("nki.compiler", _types.ModuleType("nki.compiler"))
builtin = api_module("nki.builtin", _types.ModuleType("nki.builtin"))
#: multi-rank collectives: their names import, a call is the "not emulated" error naming it
collectives = api_module("nki.collectives", _collectives_impl)
del _isa_impl, _language_impl, _constants_impl, _dtypes_impl, _collectives_impl, _types

#: Every submodule of the shim, by its import name (``install()`` puts them in ``sys.modules``).
SUBMODULES = {
    "nki.language": language,
    "nki.language.dtypes": language.dtypes,  # type: ignore[attr-defined]
    "nki.isa": isa,
    "nki.isa.constants": isa.constants,  # type: ignore[attr-defined]
    "nki.typing": typing,
    "nki.dtype": dtype,
    "nki.tensor": tensor,
    "nki.compiler": compiler,
    "nki.builtin": builtin,
    "nki.collectives": collectives,
}

__version__ = "0.6.0+nkiagent.emu"
__all__ = ["Kernel", "NkiError", "__version__", "builtin", "collectives", "compiler", "dtype", "isa", "jit", "language", "simulate", "tensor", "typing"]
