"""Backends: where a kernel runs — the embedded emulator (default) or AWS's real Neuron toolchain.

One interface, ``Backend.run(kernel_source, inputs, target) -> RunResult``, with
:class:`EmulatorBackend` and :class:`NeuronBackend`; :func:`detect` finds what this machine has
and :func:`select_backend` resolves ``--backend auto|emulator|neuron-sim|neuron-hw``.
"""

from __future__ import annotations

from typing import Any

from .base import BACKEND_CHOICES, Backend, BackendUnavailable, RunResult, detect_api, select_backend
from .detect import Toolchain, detect
from .emulator import EmulatorBackend
from .neuron import NeuronBackend

__all__ = [
    "BACKEND_CHOICES",
    "Backend",
    "BackendUnavailable",
    "EmulatorBackend",
    "NeuronBackend",
    "RunResult",
    "Toolchain",
    "detect",
    "detect_api",
    "get_backend",
    "select_backend",
]


def get_backend(requested: str = "auto", toolchain: Toolchain | None = None) -> Any:
    """The backend object for ``requested`` on this machine (``auto`` picks the best one present)."""
    tc = toolchain or detect()
    name = select_backend(requested, tc)
    return EmulatorBackend() if name == "emulator" else NeuronBackend(name, tc)
