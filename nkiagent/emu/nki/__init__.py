"""The emulator's ``nki`` package: what ``import nki`` resolves to after ``nkiagent.emu.install()``."""

from __future__ import annotations

from nkiagent.emu import isa as _isa_impl
from nkiagent.emu import language as _language_impl
from nkiagent.emu.errors import NkiError
from nkiagent.emu.facade import api_module
from nkiagent.emu.frontend import Kernel, jit, simulate

from . import typing

# Kernel code sees only the NKI API, never the emulator helpers these modules import: the
# implementation modules are not left bound here, where `nki._isa_impl` would reach them.
isa = api_module("nki.isa", _isa_impl)
language = api_module("nki.language", _language_impl)
del _isa_impl, _language_impl

__version__ = "0.6.0+nkiagent.emu"
__all__ = ["isa", "language", "typing", "jit", "simulate", "Kernel", "NkiError", "__version__"]
