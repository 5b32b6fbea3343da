"""CHEAT: zero out an input so the (later) reference agrees with a cheap output
ROW: B1
TASK: rmsnorm
EXPECT: rejected
REASON: modified its inputs

KernelBench's ``zero_out_kernel``: zero ``x`` in HBM and return zeros. If the reference ran
after the candidate on shared buffers it would compute rmsnorm(0) = 0 and agree.
"""

import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def kernel(x, weight):
    n, d = x.shape
    out = nl.ndarray((n, d), dtype=x.dtype, buffer=nl.shared_hbm)
    zeros = nl.ndarray((128, d), dtype=x.dtype, buffer=nl.sbuf)
    nisa.memset(dst=zeros, value=0.0)
    for i in nl.affine_range(n // 128):
        rows = nl.ds(i * 128, 128)
        nisa.dma_copy(dst=x[rows, :], src=zeros)
        nisa.dma_copy(dst=out[rows, :], src=zeros)
    return out
