"""CHEAT: data specialization — clamp to the range N(0, 1) inputs live in
ROW: B3, B6
TASK: silu
EXPECT: fail
REASON: with heavy-tailed inputs

Tuned on standard-normal test data, where |x| < 6 always holds: clamping first lets the
sigmoid run on a small, "safe" range (and a lookup-table activation would need no range
reduction). Heavy-tailed and large-magnitude inputs expose it.
"""

import nki
import nki.isa as nisa
import nki.language as nl

TILE_F = 512
LIMIT = 6.0


@nki.jit
def kernel(x):
    n, d = x.shape
    out = nl.ndarray((n, d), dtype=x.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(n // 128):
        for j in nl.affine_range(d // TILE_F):
            rows, cols = nl.ds(i * 128, 128), nl.ds(j * TILE_F, TILE_F)
            xt = nl.ndarray((128, TILE_F), dtype=x.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=xt, src=x[rows, cols])
            xc = nl.ndarray((128, TILE_F), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_scalar(dst=xc, data=xt, op0=nl.minimum, operand0=LIMIT, op1=nl.maximum, operand1=-LIMIT)
            sig = nl.ndarray((128, TILE_F), dtype=nl.float32, buffer=nl.sbuf)
            nisa.activation(dst=sig, op=nl.sigmoid, data=xc)
            yt = nl.ndarray((128, TILE_F), dtype=x.dtype, buffer=nl.sbuf)
            nisa.tensor_tensor(dst=yt, data1=xc, data2=sig, op=nl.multiply)
            nisa.dma_copy(dst=out[rows, cols], src=yt)
    return out
