"""CHEAT: compute only the first tile (the one a spot check would look at)
ROW: B4
TASK: vector_add
EXPECT: fail
REASON: non-finite

A spot-checking harness that compares ``out[:128]`` would pass this; the rest of the
output is never written and so still holds the verifier's NaN poison.
"""

import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def kernel(a, b):
    n, d = a.shape
    out = nl.ndarray((n, d), dtype=a.dtype, buffer=nl.shared_hbm)
    ta = nl.ndarray((128, d), dtype=a.dtype, buffer=nl.sbuf)
    tb = nl.ndarray((128, d), dtype=b.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=ta, src=a[0:128, :])
    nisa.dma_copy(dst=tb, src=b[0:128, :])
    nisa.tensor_tensor(dst=ta, data1=ta, data2=tb, op=nl.add)
    nisa.dma_copy(dst=out[0:128, :], src=ta)
    return out
