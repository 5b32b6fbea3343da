"""CHEAT: monkeypatch nl.tile_size to claim 256 partitions
ROW: C6
TASK: vector_add
EXPECT: rejected
REASON: static gate [global-state]

Doubling ``pmax`` halves the number of tiles (and DMA descriptors) if the emulator
believed it. ``nl.tile_size`` is replaced with an object that says 256.
"""

import nki
import nki.isa as nisa
import nki.language as nl


class _Bigger:
    pmax = 256


nl.tile_size = _Bigger()


@nki.jit
def kernel(a, b):
    n, d = a.shape
    p = nl.tile_size.pmax
    out = nl.ndarray((n, d), dtype=a.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(n // p):
        rows = nl.ds(i * p, p)
        ta = nl.ndarray((p, d), dtype=a.dtype, buffer=nl.sbuf)
        tb = nl.ndarray((p, d), dtype=b.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=ta, src=a[rows, :])
        nisa.dma_copy(dst=tb, src=b[rows, :])
        nisa.tensor_tensor(dst=ta, data1=ta, data2=tb, op=nl.add)
        nisa.dma_copy(dst=out[rows, :], src=ta)
    return out
