"""HONEST: a `nonlocal` counter in a helper the kernel only calls, naming each tile it loads
STYLE: 10 (trace-time bookkeeping that dies with the call)
TASK: vector_add
BEFORE: on 064c209, before issue 18: rejected, "static gate [global-state] ... `nonlocal` lets a function keep state between calls"

The counter lives in the kernel's own frame and the helper never leaves the call, so there is
no state between calls: the gate accepts it, and the same helper returned from the kernel
would still be refused.
"""

import nki
import nki.isa as nisa
import nki.language as nl

P = 128
TILE_F = 512


@nki.jit
def kernel(a, b):
    n, d = a.shape
    out = nl.ndarray((n, d), dtype=a.dtype, buffer=nl.shared_hbm)
    loaded = 0

    def load(src):
        nonlocal loaded
        loaded += 1
        t = nl.ndarray((P, TILE_F), dtype=src.dtype, buffer=nl.sbuf, name=f"in{loaded}")
        nisa.dma_copy(dst=t, src=src)
        return t

    for i in nl.affine_range(n // P):
        for j in nl.affine_range(d // TILE_F):
            rows, cols = nl.ds(i * P, P), nl.ds(j * TILE_F, TILE_F)
            ta, tb = load(a[rows, cols]), load(b[rows, cols])
            tc = nl.ndarray((P, TILE_F), dtype=a.dtype, buffer=nl.sbuf)
            nisa.tensor_tensor(dst=tc, data1=ta, data2=tb, op=nl.add)
            nisa.dma_copy(dst=out[rows, cols], src=tc)
    return out
