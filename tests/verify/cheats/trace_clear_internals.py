"""CHEAT: speed-of-light cheat — do the work, then erase it from the emulator's trace
ROW: C8
TASK: vector_add
EXPECT: rejected
REASON: static gate [dunder-attribute]

The cost model prices only the recorded trace. Through the implementation module behind
the facade (its ``__getattr__``'s closure) the kernel reaches its own context and keeps
one instruction in eight: an estimate far below what the bytes moved allow. Below the
gate the records are already out of the process (streamed as made), and the worker sees
its own copy lose records.
"""

import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np

_impl = next(c.cell_contents for c in type(nl).__getattr__.__closure__ if type(np) in type(c.cell_contents).__mro__)


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
    trace = _impl.current().trace
    if trace is not None:
        trace.instructions[:] = trace.instructions[::8]
    return out
