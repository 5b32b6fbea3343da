"""Row softmax over the last axis, rows tiled by 128 partitions.

The whole row of a tile stays in SBUF (one free-dim tile of up to 64K elements), so each
row tile is five instructions: a VectorE max reduction (negated, so it can serve directly
as the activation bias), one ScalarE ``exp(x - max)`` that also sums the row through its
``reduce_res`` port, a VectorE reciprocal of the sums, and a ``tensor_scalar`` multiply.
Intermediates are fp32 whatever the input dtype, as the engines compute in fp32.
"""

import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def softmax(x):
    """``softmax(x, axis=-1)`` for an ``[N, D]`` HBM tensor; output has x's dtype."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    rows, cols = x.shape
    pmax = nl.tile_size.pmax
    for i in nl.affine_range((rows + pmax - 1) // pmax):
        r0 = i * pmax
        p = min(pmax, rows - r0)
        xt = nl.ndarray((p, cols), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=xt, src=x[r0 : r0 + p, :])

        neg_max = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_reduce(dst=neg_max, op=nl.maximum, data=xt, axis=1, negate=True, keepdims=True)

        exps = nl.ndarray((p, cols), dtype=nl.float32, buffer=nl.sbuf)
        row_sum = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=exps, op=nl.exp, data=xt, bias=neg_max, reduce_op=nl.add, reduce_res=row_sum)

        inv_sum = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.reciprocal(dst=inv_sum, data=row_sum)

        yt = nl.ndarray((p, cols), dtype=x.dtype, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=yt, data=exps, op0=nl.multiply, operand0=inv_sum)
        nisa.dma_copy(dst=out[r0 : r0 + p, :], src=yt)
    return out
