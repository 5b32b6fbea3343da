"""``neuronxcc.nki`` after :func:`nkiagent.shim.install`: the emulator's 0.1 face plus ``benchmark`` and ``profile``.

Every name but the three timing ones (``benchmark``, ``profile``, and ``jit`` for its
``mode="benchmark"``) is the emulator's own object (:mod:`nkiagent.emu.neuronxcc.nki`), so a
kernel sees one API whichever ``install`` ran.
"""

from __future__ import annotations

from nkiagent.emu.neuronxcc.nki import NkiError, __version__, baremetal, compiler, isa, language, simulate_kernel, trace, typing
from nkiagent.shim.legacy import benchmark, jit, profile

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
