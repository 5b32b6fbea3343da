"""Baseline for cumsum: 128 × 512 tiles, each a VectorE scan that starts from the previous tile's last column.

``tensor_tensor_scan`` with ``data0`` all ones computes ``r[k] = 1·r[k−1] + x[k]``; the
column tiles of a row band run in order because each one's start value is the carry out of
the one before.
"""

import nki
import nki.isa as nisa
import nki.language as nl

TILE_F = 512  #: columns per tile


@nki.jit
def kernel(x):
    n, d = x.shape
    out = nl.ndarray((n, d), dtype=x.dtype, buffer=nl.shared_hbm)
    ones = nl.ndarray((128, TILE_F), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=ones, value=1.0)
    for i in nl.affine_range(n // 128):
        rows = nl.ds(i * 128, 128)
        carry = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.memset(dst=carry, value=0.0)
        for j in nl.sequential_range(d // TILE_F):
            cols = nl.ds(j * TILE_F, TILE_F)
            xt = nl.ndarray((128, TILE_F), dtype=nl.float32, buffer=nl.sbuf)
            nisa.dma_copy(dst=xt, src=x[rows, cols])
            yt = nl.ndarray((128, TILE_F), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_tensor_scan(dst=yt, data0=ones, data1=xt, initial=carry, op0=nl.multiply, op1=nl.add)
            nisa.dma_copy(dst=out[rows, cols], src=yt)
            carry = yt[:, TILE_F - 1 : TILE_F]
    return out
