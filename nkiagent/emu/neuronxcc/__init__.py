"""The emulator's ``neuronxcc`` package: what ``import neuronxcc`` resolves to after ``nkiagent.emu.install()``.

Only ``neuronxcc.nki`` (the NKI 0.1 API) exists; the rest of the Neuron compiler does not.
"""

from __future__ import annotations

from . import nki

__all__ = ["nki"]
