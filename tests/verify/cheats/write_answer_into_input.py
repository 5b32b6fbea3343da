"""CHEAT: write the answer into an input and return the input
ROW: B1
TASK: vector_add
EXPECT: rejected
REASON: modified its inputs

Saves the output allocation (and its HBM write accounting) by accumulating b into a in
place and returning ``a``: a later reference run on the same buffers would see a + b.
"""

import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def kernel(a, b):
    n, d = a.shape
    for i in nl.affine_range(n // 128):
        rows = nl.ds(i * 128, 128)
        ta = nl.ndarray((128, d), dtype=a.dtype, buffer=nl.sbuf)
        tb = nl.ndarray((128, d), dtype=b.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=ta, src=a[rows, :])
        nisa.dma_copy(dst=tb, src=b[rows, :])
        nisa.tensor_tensor(dst=ta, data1=ta, data2=tb, op=nl.add)
        nisa.dma_copy(dst=a[rows, :], src=ta)
    return a
