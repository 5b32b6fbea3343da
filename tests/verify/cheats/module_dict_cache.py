"""CHEAT: memoize the output in a module-level dict keyed by shape
ROW: C1, C7
TASK: vector_add
EXPECT: rejected
REASON: static gate [global-state]

CUDA-L1's address-keyed cache, NKI flavour: the first call per shape computes, later
calls return the cached tile and record almost nothing. The verifier re-executes the file
in a fresh module for every run, and the gate refuses module state written by the kernel.
"""

import nki
import nki.isa as nisa
import nki.language as nl

_CACHE = {}


@nki.jit
def kernel(a, b):
    key = tuple(a.shape)
    if key in _CACHE:
        return _CACHE[key]
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
    _CACHE[key] = out
    return out
