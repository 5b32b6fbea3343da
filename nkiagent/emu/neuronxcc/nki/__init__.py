"""The emulator's ``neuronxcc.nki``: the NKI 0.1 API (``import neuronxcc.nki as nki``).

Kernel code sees only the 0.1 API through the facade modules ``language``, ``isa`` and
``compiler``; ``typing`` is shared with the 0.3 shim (``nt.tensor``, ``nt.mutable_tensor``).
"""

from __future__ import annotations

from nkiagent.emu import legacy as _legacy
from nkiagent.emu.errors import NkiError
from nkiagent.emu.facade import api_module
from nkiagent.emu.legacy.frontend import baremetal, benchmark, jit, profile, simulate_kernel, trace
from nkiagent.emu.nki import typing

isa = api_module("neuronxcc.nki.isa", _legacy.isa)
language = api_module("neuronxcc.nki.language", _legacy.language)
compiler = api_module("neuronxcc.nki.compiler", _legacy.compiler)
del _legacy  # the implementation is not reachable as an attribute of the package kernels import

__version__ = "0.1.0+nkiagent.emu"
__all__ = [
           "NkiError",
           "__version__",
           "baremetal",
           "benchmark",
           "compiler",
           "isa",
           "jit",
           "language",
           "profile",
           "simulate_kernel",
           "trace",
           "typing",
]
