"""Honest twin of ``legacy_divide_priced_as_lowered.py``: the same legacy silu, dividing as the hardware does.

x / (1 + e^-x) written as ``nl.multiply(x, nl.reciprocal(1 + e^-x))``: VectorE's reciprocal,
then a multiply, which is what the compiler lowers ``nl.divide`` to.
"""

import neuronxcc.nki.language as nl
from neuronxcc import nki

TILE_F = 512


@nki.jit
def kernel(x):
    n, d = x.shape
    out = nl.ndarray((n, d), dtype=x.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(n // 128):
        for j in nl.affine_range(d // TILE_F):
            xt = nl.load(x[i * 128 : (i + 1) * 128, j * TILE_F : (j + 1) * TILE_F], dtype=nl.float32)
            e = nl.exp(nl.multiply(xt, -1.0))
            y = nl.multiply(xt, nl.reciprocal(e + 1.0), dtype=x.dtype)
            nl.store(out[i * 128 : (i + 1) * 128, j * TILE_F : (j + 1) * TILE_F], value=y)
    return out
