"""The emulator's ``neuronxcc.nki``: the NKI 0.1 API (``import neuronxcc.nki as nki``).

Kernel code sees only the 0.1 API through the facade modules ``language``, ``isa`` and
``compiler``; ``typing`` is shared with the 0.3 shim (``nt.tensor``, ``nt.mutable_tensor``).
``benchmark`` and ``profile`` answer with the cost model, which lies above the emulator: the
face :mod:`nkiagent.shim` installs has them; this one refuses them by name (``__getattr__``).
"""

from __future__ import annotations

from typing import Any as _Any

from nkiagent.emu import legacy as _legacy
from nkiagent.emu.errors import NkiError
from nkiagent.emu.facade import api_module
from nkiagent.emu.legacy.frontend import COST_MODEL_ENTRY_POINTS as _COST_MODEL_ENTRY_POINTS
from nkiagent.emu.legacy.frontend import baremetal, jit, simulate_kernel, trace
from nkiagent.emu.legacy.frontend import needs_cost_model as _needs_cost_model
from nkiagent.emu.nki import typing

isa = api_module("neuronxcc.nki.isa", _legacy.isa)
language = api_module("neuronxcc.nki.language", _legacy.language)
compiler = api_module("neuronxcc.nki.compiler", _legacy.compiler)
del _legacy  # the implementation is not reachable as an attribute of the package kernels import


def __getattr__(name: str) -> _Any:
    """``neuronxcc.nki.benchmark`` / ``.profile`` without the cost model: a clear refusal, not a bare AttributeError."""
    if name in _COST_MODEL_ENTRY_POINTS:
        raise _needs_cost_model(name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__version__ = "0.1.0+nkiagent.emu"
__all__ = [
           "NkiError",
           "__version__",
           "baremetal",
           "compiler",
           "isa",
           "jit",
           "language",
           "simulate_kernel",
           "trace",
           "typing",
]
