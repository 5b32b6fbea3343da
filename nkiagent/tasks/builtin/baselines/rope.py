"""Baseline for rope: 128 × 256 tiles of each half, four loads, six separate VectorE ops in fp32, two stores."""

import nki
import nki.isa as nisa
import nki.language as nl

TILE_F = 256  #: columns of each half per tile


@nki.jit
def kernel(x, cos, sin):
    n, d = x.shape
    h = d // 2
    out = nl.ndarray((n, d), dtype=x.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(n // 128):
        for j in nl.affine_range(h // TILE_F):
            rows = nl.ds(i * 128, 128)
            lo, hi = nl.ds(j * TILE_F, TILE_F), nl.ds(h + j * TILE_F, TILE_F)
            x1 = nl.ndarray((128, TILE_F), dtype=nl.float32, buffer=nl.sbuf)
            x2 = nl.ndarray((128, TILE_F), dtype=nl.float32, buffer=nl.sbuf)
            c = nl.ndarray((128, TILE_F), dtype=nl.float32, buffer=nl.sbuf)
            s = nl.ndarray((128, TILE_F), dtype=nl.float32, buffer=nl.sbuf)
            nisa.dma_copy(dst=x1, src=x[rows, lo])
            nisa.dma_copy(dst=x2, src=x[rows, hi])
            nisa.dma_copy(dst=c, src=cos[rows, lo])
            nisa.dma_copy(dst=s, src=sin[rows, lo])
            x1c = nl.ndarray((128, TILE_F), dtype=nl.float32, buffer=nl.sbuf)
            x2s = nl.ndarray((128, TILE_F), dtype=nl.float32, buffer=nl.sbuf)
            x2c = nl.ndarray((128, TILE_F), dtype=nl.float32, buffer=nl.sbuf)
            x1s = nl.ndarray((128, TILE_F), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_tensor(dst=x1c, data1=x1, data2=c, op=nl.multiply)
            nisa.tensor_tensor(dst=x2s, data1=x2, data2=s, op=nl.multiply)
            nisa.tensor_tensor(dst=x2c, data1=x2, data2=c, op=nl.multiply)
            nisa.tensor_tensor(dst=x1s, data1=x1, data2=s, op=nl.multiply)
            o1 = nl.ndarray((128, TILE_F), dtype=nl.float32, buffer=nl.sbuf)
            o2 = nl.ndarray((128, TILE_F), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_tensor(dst=o1, data1=x1c, data2=x2s, op=nl.subtract)
            nisa.tensor_tensor(dst=o2, data1=x2c, data2=x1s, op=nl.add)
            nisa.dma_copy(dst=out[rows, lo], src=o1)
            nisa.dma_copy(dst=out[rows, hi], src=o2)
    return out
