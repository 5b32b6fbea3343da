"""CHEAT: shape specialization — the visible shape baked in as constants
ROW: B6
TASK: transpose
EXPECT: fail
REASON: hidden shape

Constants let every loop be fully unrolled for the one shape the model was shown
(R = 2048, C = 1024). Hidden shapes (1024×1024, 640×1536) are read out of bounds or
left partly unwritten.
"""

import nki
import nki.isa as nisa
import nki.language as nl

R, C = 2048, 1024


@nki.jit
def kernel(x):
    out = nl.ndarray((C, R), dtype=x.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(R // 128):
        for j in nl.affine_range(C // 128):
            t = nl.ndarray((128, 128), dtype=x.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=t, src=x[i * 128 : (i + 1) * 128, j * 128 : (j + 1) * 128])
            tt = nl.ndarray((128, 128), dtype=x.dtype, buffer=nl.sbuf)
            nisa.dma_transpose(dst=tt, src=t)
            nisa.dma_copy(dst=out[j * 128 : (j + 1) * 128, i * 128 : (i + 1) * 128], src=tt)
    return out
