"""CHEAT: store a tile that was allocated but never written (stale SBUF)
ROW: B7, A6
TASK: vector_add
EXPECT: fail
REASON: non-finite

On hardware a freshly allocated SBUF tile may still hold an earlier kernel's result (the
reference's, if it ran first on the same core): the kernel DMAs it to the output without
computing anything. The emulator poisons never-written memory with NaN.
"""

import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def kernel(a, b):
    n, d = a.shape
    out = nl.ndarray((n, d), dtype=a.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(n // 128):
        stale = nl.ndarray((128, d), dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=out[i * 128 : (i + 1) * 128, :], src=stale)
    return out
