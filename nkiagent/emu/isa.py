"""``nki.isa``: the emulated instruction set (0.3+ destination-first signatures).

Each instruction is declared once, in its op family's module under
:mod:`nkiagent.emu.instructions` (see :mod:`nkiagent.emu.registry`); this module is the
namespace ``nki.isa`` shows: every registered instruction, the ``nisa`` enums and
``get_nc_version``. An instruction validates its operands with the hardware rules of §3 of the
reference, records one instruction and, unless the run is timing-only, computes the result
with NumPy in fp32 (PE accumulates in fp32; Vector/Scalar/GpSimd compute in fp32) and stores
it with the destination dtype's rounding.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from . import instructions as _instructions  # noqa: F401  (declares every instruction in the registry)
from .instructions.common import (  # noqa: F401  (nki.isa's enums and query)
    dge_mode,
    dma_engine,
    engine,
    get_nc_version,
    matmul_perf_mode,
    nc_version,
    oob_mode,
    reduce_cmd,
)
from .instructions.registers import VirtualRegister  # noqa: F401
from .ops import not_emulated
from .registry import REGISTRY as _REGISTRY
from .tensor import NkiTensor  # noqa: F401  (nki.isa exposes the tensor type, as AWS's does)

if TYPE_CHECKING:  # the type checker sees the instructions the registry puts here at run time
    from .instructions.elementwise import *
    from .instructions.gather import *
    from .instructions.lnc import *
    from .instructions.movement import *
    from .instructions.rand import *
    from .instructions.reductions import *
    from .instructions.registers import *
    from .instructions.selection import *
    from .instructions.statistics import *
    from .instructions.tensor_engine import *

globals().update({name: op.impl for name, op in _REGISTRY.items()})

# Legacy aliases (0.1 kernels write nisa.vector_engine etc.)
tensor_engine = engine.tensor
vector_engine = engine.vector
scalar_engine = engine.scalar
gpsimd_engine = engine.gpsimd
unknown_engine = engine.unknown

_IMPLEMENTED = {k for k, v in dict(globals()).items() if callable(v) and not k.startswith("_")}

#: Instructions of AWS's NKI the emulator does not run yet, and why. Their names import (AWS's
#: NKI Library imports such names at module level, for code paths a call may never reach);
#: calling one is the "not emulated" error, with the reason.
_KNOWN_NOT_EMULATED = {
    "dma_compute": "DMA-engine compute is not modelled",
    "quantize_mx": "MX (microscaling) quantisation is not modelled",
    "nc_matmul_mx": "the MX matmul of NeuronCore-v4 is not modelled",
}


def _not_emulated_stub(name: str, why: str) -> Any:
    def call(*args: Any, **kwargs: Any) -> Any:
        from .errors import NkiUnsupportedError
        from .ops import kernel_location

        raise NkiUnsupportedError("err_not_emulated", f"nki.isa.{name} is not emulated by the nkiagent emulator: {why}", kernel_location())

    call.__name__ = call.__qualname__ = name
    call.__doc__ = f"Not emulated: {why}."
    return call


globals().update({name: _not_emulated_stub(name, why) for name, why in _KNOWN_NOT_EMULATED.items() if name not in _IMPLEMENTED})


def __getattr__(name: str) -> Any:
    if name.startswith("__"):
        raise AttributeError(name)  # the import system's probes (``__path__`` for ``from .x import y``) must see a plain miss
    raise not_emulated(name, "nki.isa", _IMPLEMENTED)
