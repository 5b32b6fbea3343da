"""Baseline for silu: 128 × 512 tiles; sigmoid on ScalarE into fp32, then a VectorE multiply by x."""

import nki
import nki.isa as nisa
import nki.language as nl

TILE_F = 512  #: columns per tile  # nkiagent: tune [128, 256, 512]


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
            yt = nl.ndarray((128, TILE_F), dtype=x.dtype, buffer=nl.sbuf)
            nisa.tensor_tensor(dst=yt, data1=xt, data2=sig, op=nl.multiply)
            nisa.dma_copy(dst=out[rows, cols], src=yt)
    return out
