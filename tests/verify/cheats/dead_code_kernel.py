"""CHEAT: a real kernel that is compiled but never called; the launched one is a copy
ROW: A5
TASK: cumsum
EXPECT: fail
REASON: wrong answer

The file contains a plausible scan kernel (``_scan``), but ``kernel`` — the one the
harness launches — only copies x to the output. Backend-pattern checks that look for
NKI code in the file would be satisfied; only the outputs tell.
"""

import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def _scan(x):
    n, d = x.shape
    out = nl.ndarray((n, d), dtype=x.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(n // 128):
        xt = nl.ndarray((128, d), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=xt, src=x[i * 128 : (i + 1) * 128, :])
        ones = nl.ndarray((128, d), dtype=x.dtype, buffer=nl.sbuf)
        nisa.memset(dst=ones, value=1.0)
        yt = nl.ndarray((128, d), dtype=x.dtype, buffer=nl.sbuf)
        nisa.tensor_tensor_scan(dst=yt, data0=ones, data1=xt, initial=0.0, op0=nl.multiply, op1=nl.add)
        nisa.dma_copy(dst=out[i * 128 : (i + 1) * 128, :], src=yt)
    return out


@nki.jit
def kernel(x):
    n, d = x.shape
    out = nl.ndarray((n, d), dtype=x.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(n // 128):
        xt = nl.ndarray((128, d), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=xt, src=x[i * 128 : (i + 1) * 128, :])
        nisa.dma_copy(dst=out[i * 128 : (i + 1) * 128, :], src=xt)
    return out
