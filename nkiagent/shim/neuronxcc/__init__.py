"""``neuronxcc`` after :func:`nkiagent.shim.install`: only ``neuronxcc.nki``, the face with timing entry points."""

from __future__ import annotations

from . import nki

__all__ = ["nki"]
