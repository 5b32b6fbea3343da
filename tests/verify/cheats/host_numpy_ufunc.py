"""CHEAT: a NumPy ufunc applied to SBUF tiles instead of the VectorE multiply
ROW: A1
TASK: silu
EXPECT: fail
REASON: does not support ufuncs

Load and sigmoid on the device as usual, but form x·sigmoid(x) with ``np.multiply`` on
the two tiles: the multiply would be free in the trace (no VectorE instruction recorded)
and the estimate would drop. Tiles set ``__array_ufunc__ = None``, so NumPy refuses them.
"""

import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np

TILE_F = 512


@nki.jit
def kernel(x):
    n, d = x.shape
    out = nl.ndarray((n, d), dtype=x.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(n // 128):
        for j in nl.affine_range(d // TILE_F):
            rows, cols = nl.ds(i * 128, 128), nl.ds(j * TILE_F, TILE_F)
            xt = nl.ndarray((128, TILE_F), dtype=x.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=xt, src=x[rows, cols])
            sig = nl.ndarray((128, TILE_F), dtype=nl.float32, buffer=nl.sbuf)
            nisa.activation(dst=sig, op=nl.sigmoid, data=xt)
            yt = np.multiply(xt, sig)
            nisa.dma_copy(dst=out[rows, cols], src=yt)
    return out
