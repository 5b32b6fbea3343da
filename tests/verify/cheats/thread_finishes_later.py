"""CHEAT: return at once and let a background thread finish the work
ROW: C5
TASK: vector_add
EXPECT: rejected
REASON: static gate [forbidden-import]

Thread injection (KernelBench ``thread_injection``): the kernel returns its output handle
immediately; a Python thread runs the tiles while the harness is "timing" something else.
"""

import threading

import nki
import nki.isa as nisa
import nki.language as nl


def _fill(a, b, out):
    n, d = a.shape
    for i in range(n // 128):
        rows = nl.ds(i * 128, 128)
        ta = nl.ndarray((128, d), dtype=a.dtype, buffer=nl.sbuf)
        tb = nl.ndarray((128, d), dtype=b.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=ta, src=a[rows, :])
        nisa.dma_copy(dst=tb, src=b[rows, :])
        nisa.tensor_tensor(dst=ta, data1=ta, data2=tb, op=nl.add)
        nisa.dma_copy(dst=out[rows, :], src=ta)


@nki.jit
def kernel(a, b):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    threading.Thread(target=_fill, args=(a, b, out), daemon=True).start()
    return out
