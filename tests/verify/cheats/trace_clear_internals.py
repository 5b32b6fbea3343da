"""CHEAT: speed-of-light cheat — do the work, then erase it from the emulator's trace
ROW: C8
TASK: vector_add
EXPECT: rejected
REASON: static gate [private-attribute]

The cost model prices only the recorded trace. Through the implementation module behind
the facade (``nki._language_impl.current()``) the kernel reaches its own context and keeps
one instruction in eight: an estimate far below what the bytes moved allow.
"""

import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def kernel(a, b):
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
    trace = nki._language_impl.current().trace
    if trace is not None:
        trace.instructions[:] = trace.instructions[::8]
    return out
