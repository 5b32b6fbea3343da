"""CHEAT: memoize through a mutable default argument
ROW: C1
TASK: vector_add
EXPECT: rejected
REASON: static gate [global-state]

The same shape-keyed output cache, moved into a helper's ``memo={}`` default, which a
check for module-level assignments does not see: the dict lives as long as the function.
"""

import nki
import nki.isa as nisa
import nki.language as nl


def _compute(a, b, memo={}):
    key = tuple(a.shape)
    if key not in memo:
        n, d = a.shape
        out = nl.ndarray((n, d), dtype=a.dtype, buffer=nl.shared_hbm)
        for i in nl.affine_range(n // 128):
            rows = nl.ds(i * 128, 128)
            ta = nl.ndarray((128, d), dtype=a.dtype, buffer=nl.sbuf)
            tb = nl.ndarray((128, d), dtype=b.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=ta, src=a[rows, :])
            nisa.dma_copy(dst=tb, src=b[rows, :])
            nisa.tensor_tensor(dst=ta, data1=ta, data2=tb, op=nl.add)
            nisa.dma_copy(dst=out[rows, :], src=ta)
        memo[key] = out
    return memo[key]


@nki.jit
def kernel(a, b):
    return _compute(a, b)
