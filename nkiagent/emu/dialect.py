"""A dialect: what tensor code does differently for one NKI API generation, held by each run.

Kernels of the first API generation (``neuronxcc.nki``, 0.1) write things 0.3+ does not have:
slices running past a dimension that a mask cuts back, ``t[i] = value`` writing an op's result
into its target, 0.1-only tile methods (``t.broadcast_to``), tile operators that dispatch to
the 0.1 ``nl``. The tensor code asks the running kernel's :class:`Dialect` (``ctx.dialect``)
instead of module-global hooks patched in at import: a 0.3 run holds :data:`MODERN` (no
extras), a 0.1 launch builds the legacy front-end's dialect for itself
(:func:`nkiagent.emu.legacy.dialect.legacy_dialect`), so importing the two front-ends in
either order changes nothing.
"""

from __future__ import annotations

import types
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .tensor import NkiTensor

__all__ = ["MODERN", "Dialect"]


@dataclass(frozen=True, slots=True)
class Dialect:
    """The API-generation-specific behaviours of one run's tensors; ``None`` where the generation has none."""

    api: str
    #: ``t[index]`` that only this dialect can index (0.1's slices past a dimension), else ``None``.
    index: Callable[[NkiTensor, tuple[Any, ...]], NkiTensor | None] | None = None
    #: ``dst[...] = value``.
    assign: Callable[[NkiTensor, Any], None] | None = None
    #: ``t.<name>`` for a name the tensor class lacks.
    tile_method: Callable[[NkiTensor, str], Any] | None = None
    #: The ``nl`` module tile operators (``a + b``) dispatch to.
    ops: types.ModuleType | None = None


#: The 0.3+ API: tensors behave as the class defines them.
MODERN = Dialect("0.3")
