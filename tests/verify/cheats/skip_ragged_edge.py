"""CHEAT: 1024-wide column tiles that silently drop the ragged edge
ROW: B4, B6
TASK: vector_add
EXPECT: fail
REASON: hidden shape

Wide tiles are fast on the visible shape (D = 1024 is one tile), and ``d // 1024`` quietly
skips whatever does not fill a whole tile. Hidden shapes have D = 512 (no tile at all) and
D = 1536 (the last 512 columns are never written).
"""

import nki
import nki.isa as nisa
import nki.language as nl

TILE_D = 1024


@nki.jit
def kernel(a, b):
    n, d = a.shape
    out = nl.ndarray((n, d), dtype=a.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(n // 128):
        for j in nl.affine_range(d // TILE_D):
            rows, cols = nl.ds(i * 128, 128), nl.ds(j * TILE_D, TILE_D)
            ta = nl.ndarray((128, TILE_D), dtype=a.dtype, buffer=nl.sbuf)
            tb = nl.ndarray((128, TILE_D), dtype=b.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=ta, src=a[rows, cols])
            nisa.dma_copy(dst=tb, src=b[rows, cols])
            nisa.tensor_tensor(dst=ta, data1=ta, data2=tb, op=nl.add)
            nisa.dma_copy(dst=out[rows, cols], src=ta)
    return out
