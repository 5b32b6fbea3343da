"""Tiled element-wise vector add: the "hello world" of NKI.

Rows go onto the 128 SBUF partitions and columns are cut into free-dimension tiles, so
any ``[N, D]`` shape works; ragged edge tiles are handled with ``min()`` (NKI 0.3+ has no
masks). Each tile is two DMA loads, one VectorE ``tensor_tensor`` and one DMA store.
"""

import nki
import nki.isa as nisa
import nki.language as nl

#: Columns per tile. 512 fp32 = 2 KiB per partition per operand: large enough to amortize the
#: fixed DMA cost, small enough that three live tiles use a tiny share of SBUF.
FREE_TILE = 512


@nki.jit
def vector_add(a, b):
    """``a + b`` for two ``[N, D]`` HBM tensors of the same dtype; returns a new ``[N, D]`` tensor."""
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    rows, cols = a.shape
    pmax = nl.tile_size.pmax
    for i in nl.affine_range((rows + pmax - 1) // pmax):
        r0 = i * pmax
        p = min(pmax, rows - r0)
        for j in nl.affine_range((cols + FREE_TILE - 1) // FREE_TILE):
            c0 = j * FREE_TILE
            f = min(FREE_TILE, cols - c0)
            ta = nl.ndarray((p, f), dtype=a.dtype, buffer=nl.sbuf)
            tb = nl.ndarray((p, f), dtype=b.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=ta, src=a[r0 : r0 + p, c0 : c0 + f])
            nisa.dma_copy(dst=tb, src=b[r0 : r0 + p, c0 : c0 + f])
            tc = nl.ndarray((p, f), dtype=a.dtype, buffer=nl.sbuf)
            nisa.tensor_tensor(dst=tc, data1=ta, data2=tb, op=nl.add)
            nisa.dma_copy(dst=out[r0 : r0 + p, c0 : c0 + f], src=tc)
    return out
