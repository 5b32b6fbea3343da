"""The 0.1 (``neuronxcc.nki``) dialect a legacy launch gives its run (see :mod:`nkiagent.emu.dialect`)."""

from __future__ import annotations

from typing import Any

from ..dialect import Dialect
from ..tensor import NkiTensor
from . import grid, language, runtime

__all__ = ["legacy_dialect"]


def _index(t: NkiTensor, index: tuple[Any, ...]) -> NkiTensor | None:
    """``t[256:384, h0:h1]`` running past a dimension, indexed as the equivalent index grid (``None`` when every slice fits)."""
    grids = grid.slice_hook(t, index)
    return None if grids is None else grid.index_hook(t, grids)


def legacy_dialect() -> Dialect:
    """A fresh 0.1 dialect for one launch."""
    return Dialect("0.1", index=_index, assign=runtime.assign, tile_method=language._tile_method, ops=language)
