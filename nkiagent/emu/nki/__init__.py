"""The emulator's ``nki`` package: what ``import nki`` resolves to after ``nkiagent.emu.install()``."""

from __future__ import annotations

from nkiagent.emu import isa, language
from nkiagent.emu.errors import NkiError
from nkiagent.emu.frontend import Kernel, jit, simulate

from . import typing

__version__ = "0.6.0+nkiagent.emu"
__all__ = ["isa", "language", "typing", "jit", "simulate", "Kernel", "NkiError", "__version__"]
