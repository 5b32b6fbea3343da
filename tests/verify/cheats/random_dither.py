"""CHEAT: non-deterministic output (random dither below the tolerance)
ROW: B7
TASK: vector_add
EXPECT: rejected
REASON: static gate [forbidden-import]

Unseeded host randomness added at 1e-9 relative scale: harmless to the tolerance, but it
makes the kernel non-deterministic, the signature of stale-memory and race exploits that
the two-runs-on-the-same-input check is there to catch.
"""

import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np


@nki.jit
def kernel(a, b):
    n, d = a.shape
    noise = nl.shared_constant(np.random.default_rng().standard_normal((n, d)).astype(np.float32) * np.float32(1e-9))
    out = nl.ndarray((n, d), dtype=a.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(n // 128):
        rows = nl.ds(i * 128, 128)
        ta = nl.ndarray((128, d), dtype=a.dtype, buffer=nl.sbuf)
        tb = nl.ndarray((128, d), dtype=b.dtype, buffer=nl.sbuf)
        tn = nl.ndarray((128, d), dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=ta, src=a[rows, :])
        nisa.dma_copy(dst=tb, src=b[rows, :])
        nisa.dma_copy(dst=tn, src=noise[rows, :])
        nisa.tensor_tensor(dst=ta, data1=ta, data2=tb, op=nl.add)
        nisa.tensor_tensor(dst=ta, data1=ta, data2=tn, op=nl.add)
        nisa.dma_copy(dst=out[rows, :], src=ta)
    return out
