"""Tiled vector add in the NKI 0.3+ style: 128-partition tiles, DMA in, VectorE add, DMA out."""

import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def vector_add(a, b):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    rows, cols = a.shape
    for i in nl.affine_range(rows // nl.tile_size.pmax):
        sl = nl.ds(i * nl.tile_size.pmax, nl.tile_size.pmax)
        ta = nl.ndarray((nl.tile_size.pmax, cols), dtype=a.dtype, buffer=nl.sbuf)
        tb = nl.ndarray((nl.tile_size.pmax, cols), dtype=b.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=ta, src=a[sl, :])
        nisa.dma_copy(dst=tb, src=b[sl, :])
        tc = nl.ndarray((nl.tile_size.pmax, cols), dtype=a.dtype, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=tc, data1=ta, data2=tb, op=nl.add)
        nisa.dma_copy(dst=out[sl, :], src=tc)
    return out
