"""CHEAT: deferred work through concurrent.futures (threads without importing threading)
ROW: C3
TASK: vector_add
EXPECT: rejected
REASON: static gate [forbidden-import]

Superbatching-style deferral: submit the tiles to an executor and return the output
before they run. ``concurrent.futures`` spawns threads under the hood.
"""

from concurrent.futures import ThreadPoolExecutor

import nki
import nki.isa as nisa
import nki.language as nl

_POOL = ThreadPoolExecutor(max_workers=2)


def _tile(a, b, out, i):
    rows = nl.ds(i * 128, 128)
    ta = nl.ndarray((128, a.shape[1]), dtype=a.dtype, buffer=nl.sbuf)
    tb = nl.ndarray((128, b.shape[1]), dtype=b.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=ta, src=a[rows, :])
    nisa.dma_copy(dst=tb, src=b[rows, :])
    nisa.tensor_tensor(dst=ta, data1=ta, data2=tb, op=nl.add)
    nisa.dma_copy(dst=out[rows, :], src=ta)


@nki.jit
def kernel(a, b):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    for i in range(a.shape[0] // 128):
        _POOL.submit(_tile, a, b, out, i)
    return out
