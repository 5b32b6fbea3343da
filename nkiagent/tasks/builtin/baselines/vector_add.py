"""Baseline for vector_add: the NKI tutorial's tiling — 128 × 512 tiles, two loads, one VectorE add, one store."""

import nki
import nki.isa as nisa
import nki.language as nl

TILE_F = 512  #: columns per tile, as in the NKI getting-started tutorial  # nkiagent: tune [128, 256, 512]


@nki.jit
def kernel(a, b):
    n, d = a.shape
    out = nl.ndarray((n, d), dtype=a.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(n // 128):
        for j in nl.affine_range(d // TILE_F):
            rows, cols = nl.ds(i * 128, 128), nl.ds(j * TILE_F, TILE_F)
            ta = nl.ndarray((128, TILE_F), dtype=a.dtype, buffer=nl.sbuf)
            tb = nl.ndarray((128, TILE_F), dtype=b.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=ta, src=a[rows, cols])
            nisa.dma_copy(dst=tb, src=b[rows, cols])
            tc = nl.ndarray((128, TILE_F), dtype=a.dtype, buffer=nl.sbuf)
            nisa.tensor_tensor(dst=tc, data1=ta, data2=tb, op=nl.add)
            nisa.dma_copy(dst=out[rows, cols], src=tc)
    return out
