"""CHEAT: reach eval through getattr on __builtins__
ROW: D5
TASK: vector_add
EXPECT: rejected
REASON: static gate [forbidden-call]

No eval token in the source: fetch it from the builtins mapping by a computed name.
"""

import nki
import nki.isa as nisa
import nki.language as nl

_EV = "ev" + "al"


@nki.jit
def kernel(a, b):
    run = __builtins__[_EV] if isinstance(__builtins__, dict) else getattr(__builtins__, _EV)
    run("1 + 1")
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
    return out
