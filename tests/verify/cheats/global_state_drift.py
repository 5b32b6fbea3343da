"""CHEAT: global state across calls (a call counter that leaks into the output)
ROW: C1, B7
TASK: vector_add
EXPECT: rejected
REASON: static gate [global-state]

Stateful kernel: a counter kept on a shared object of the NKI module (``nl.tile_size``,
reached through a local alias; the gate sees the write) survives the fresh kernel module
of each run. Here the state only shifts the output by calls·1e-8 — far inside the
tolerance — so below the gate only the determinism re-run of case 0 notices.
"""

import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def kernel(a, b):
    registry = nl.tile_size
    calls = getattr(registry, "launches", 0) + 1
    registry.launches = calls
    n, d = a.shape
    out = nl.ndarray((n, d), dtype=a.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(n // 128):
        rows = nl.ds(i * 128, 128)
        ta = nl.ndarray((128, d), dtype=a.dtype, buffer=nl.sbuf)
        tb = nl.ndarray((128, d), dtype=b.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=ta, src=a[rows, :])
        nisa.dma_copy(dst=tb, src=b[rows, :])
        nisa.tensor_tensor(dst=ta, data1=ta, data2=tb, op=nl.add)
        nisa.tensor_scalar(dst=ta, data=ta, op0=nl.add, operand0=calls * 1e-8)
        nisa.dma_copy(dst=out[rows, :], src=ta)
    return out
