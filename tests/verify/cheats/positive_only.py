"""CHEAT: only handle positive values (silu of a negative is "small")
ROW: B4
TASK: silu
EXPECT: fail
REASON: wrong answer

silu(x) for x < 0 lies in (-0.28, 0), so the kernel computes relu(x)·sigmoid(x) and
treats the negative half as zero, betting on a loose absolute tolerance.
"""

import nki
import nki.isa as nisa
import nki.language as nl

TILE_F = 512


@nki.jit
def kernel(x):
    n, d = x.shape
    out = nl.ndarray((n, d), dtype=x.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(n // 128):
        for j in nl.affine_range(d // TILE_F):
            rows, cols = nl.ds(i * 128, 128), nl.ds(j * TILE_F, TILE_F)
            xt = nl.ndarray((128, TILE_F), dtype=x.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=xt, src=x[rows, cols])
            pos = nl.ndarray((128, TILE_F), dtype=nl.float32, buffer=nl.sbuf)
            nisa.activation(dst=pos, op=nl.relu, data=xt)
            sig = nl.ndarray((128, TILE_F), dtype=nl.float32, buffer=nl.sbuf)
            nisa.activation(dst=sig, op=nl.sigmoid, data=xt)
            yt = nl.ndarray((128, TILE_F), dtype=x.dtype, buffer=nl.sbuf)
            nisa.tensor_tensor(dst=yt, data1=pos, data2=sig, op=nl.multiply)
            nisa.dma_copy(dst=out[rows, cols], src=yt)
    return out
