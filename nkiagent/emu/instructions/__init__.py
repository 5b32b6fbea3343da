"""The emulated ``nki.isa`` instructions, one module per op family.

Importing this package declares every instruction in :data:`nkiagent.emu.registry.REGISTRY`.
Each family module imports only the registry and the shared machinery (``ops``, ``memory``,
``tensor``, ``alu``, ``dtypes``, ``errors``, ``engines``, ``trace`` and :mod:`.common`), never
another family: ``tests/emu/test_registry.py`` checks it.
"""

from __future__ import annotations

from . import elementwise, gather, lnc, movement, rand, reductions, registers, selection, statistics, tensor_engine

__all__ = ["elementwise", "gather", "lnc", "movement", "rand", "reductions", "registers", "selection", "statistics", "tensor_engine"]
